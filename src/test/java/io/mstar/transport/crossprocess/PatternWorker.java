package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.lifecycle.ParentWatch;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.BitSet;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The ways real workers are written that once broke "one outcome per post" ({@link UsagePatternsTest}), one
 * process each. Usage:
 * <ul>
 *   <li>{@code loop ENTITY TO TOTAL IN_FLIGHT}: a request loop driven by outcomes: IN_FLIGHT posts from main, then
 *       the listener posts one more on each outcome until TOTAL; prints each tensor told twice or never, and the
 *       deepest stack the listener ran on.</li>
 *   <li>{@code stage ENTITY TO WINDOW}: a pipeline stage: its handler takes one of WINDOW permits, which its
 *       listener gives back, and posts the tensor downstream; ends on a tensor named {@code end}.</li>
 *   <li>{@code sink ENTITY MICROS}: takes MICROS per tensor in its handler; prints how many it got at {@code end}.</li>
 *   <li>{@code window ENTITY TO SECONDS post|claim}: the outside benchmark's producer: 4 KiB tensors, request id
 *       its sequence number, at most 64 in flight counted from a locked ring its listener fills (told on the
 *       endpoint's ACK thread or a sender), a slot per {@code seq % 64}; stops at the first outcome whose request
 *       id is not its slot's (an outcome told out of order, or misnamed).</li>
 * </ul>
 */
public final class PatternWorker {
    private PatternWorker() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Deployment deployment = Deployment.fromEnvironment("patterns", args[1]);
        switch (args[0]) {
            case "loop" -> loop(deployment, args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "stage" -> stage(deployment, args[2], Integer.parseInt(args[3]));
            case "sink" -> sink(deployment, Long.parseLong(args[2]));
            case "window" -> window(deployment, args[2], Long.parseLong(args[3]), args[4].equals("claim"));
            default -> throw new IllegalArgumentException(args[0]);
        }
        System.exit(0);
    }

    private static void loop(Deployment deployment, String to, int total, int inFlight) throws Exception {
        MemorySegment bytes = MemorySegment.ofArray(new byte[4096]);
        Tensor tensor = Tensor.of(DType.U8, bytes, 4096);
        BitSet told = new BitSet(total);
        AtomicInteger twice = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicInteger posted = new AtomicInteger();
        AtomicInteger maxDepth = new AtomicInteger();
        AtomicLong outcomes = new AtomicLong();
        TensorEndpoint[] endpoint = new TensorEndpoint[1];
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                heard(requestId, false);
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                heard(requestId, true);
            }

            private void heard(String requestId, boolean failure) {
                int depth = StackWalker.getInstance().walk(s -> (int) s.count());
                maxDepth.accumulateAndGet(depth, Math::max);
                int seq = Integer.parseInt(requestId);
                synchronized (told) {
                    if (told.get(seq)) {
                        twice.incrementAndGet();
                    }
                    told.set(seq);
                }
                if (failure) {
                    failed.incrementAndGet();
                }
                outcomes.incrementAndGet();
                int next = posted.getAndIncrement();
                if (next < total) {
                    endpoint[0].post(to, Integer.toString(next), tensor); // the next request, from the listener
                } else {
                    posted.decrementAndGet();
                }
            }
        };
        try (TensorEndpoint e = TensorEndpoint.open(deployment, listener)) {
            endpoint[0] = e;
            if (!e.awaitPeer(to, Duration.ofSeconds(60))) {
                throw new IllegalStateException("no consumer");
            }
            for (int i = 0; i < inFlight; i++) {
                int next = posted.getAndIncrement();
                e.post(to, Integer.toString(next), tensor);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (outcomes.get() < total && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            int never;
            synchronized (told) {
                never = total - told.cardinality();
            }
            System.out.println("RESULT posted=" + posted.get() + " told=" + outcomes.get() + " twice=" + twice.get()
                + " never=" + never + " failed=" + failed.get() + " maxDepth=" + maxDepth.get());
        }
    }

    private static void stage(Deployment deployment, String to, int window) throws Exception {
        Semaphore permits = new Semaphore(window);
        AtomicLong forwarded = new AtomicLong();
        DeliveryListener releases = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                permits.release();
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.out.println("FAILED " + requestId + " " + failure + " " + detail);
                permits.release();
            }
        };
        boolean[] ended = new boolean[1];
        try (TensorEndpoint e = TensorEndpoint.open(deployment, releases)) {
            if (!e.awaitPeer(to, Duration.ofSeconds(60))) {
                throw new IllegalStateException("no sink");
            }
            System.out.println("READY");
            while (!ended[0]) {
                e.receive(t -> {
                    String id = t.requestId().toString();
                    try {
                        if (!permits.tryAcquire(60, TimeUnit.SECONDS)) { // the window of the stage's own
                            System.out.println("STUCK after " + forwarded.get());
                            return;
                        }
                    } catch (InterruptedException ex) {
                        Thread.currentThread().interrupt();
                        return;
                    }
                    e.post(to, id, Tensor.of(t.dtype(), t.data(), t.nbytes()));
                    forwarded.incrementAndGet();
                    ended[0] |= id.equals("end");
                }, Duration.ofSeconds(1));
            }
            permits.acquire(window); // every downstream outcome told
            System.out.println("RESULT forwarded=" + forwarded.get());
        }
    }

    private static void window(Deployment deployment, String to, long seconds, boolean claim) throws Exception {
        int window = 64;
        long[] ring = new long[1 << 16]; // told sequence numbers, filled by the listener
        long[] ringCount = new long[2]; // [0] written, [1] read; guarded by ring
        DeliveryListener toRing = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                long seq = Long.parseLong(requestId);
                synchronized (ring) {
                    ring[(int) (ringCount[0]++ & (ring.length - 1))] = seq;
                }
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.out.println("FAILED " + requestId + " " + failure + " " + detail);
                delivered(requestId, uuidMsb, uuidLsb);
            }
        };
        long[] slots = new long[window];
        java.util.Arrays.fill(slots, -1);
        MemorySegment own = MemorySegment.ofArray(new byte[4096]);
        Tensor tensor = Tensor.of(DType.U8, own, 4096);
        long seq = 0;
        long told = 0;
        String misnamed = null;
        try (TensorEndpoint e = TensorEndpoint.open(deployment, toRing)) {
            if (!e.awaitPeer(to, Duration.ofSeconds(60))) {
                throw new IllegalStateException("no consumer");
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            long lastOutcome = System.nanoTime();
            boolean draining = false;
            while (misnamed == null) {
                if (!draining && System.nanoTime() > end) {
                    draining = true; // then wait for all of them
                }
                if (!draining && seq - told < window) {
                    int slot = (int) (seq % window);
                    slots[slot] = seq;
                    if (claim) {
                        try (var c = e.claim(Long.toString(seq), DType.U8, 4096)) {
                            c.memory().set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
                            e.post(to, c);
                        }
                    } else {
                        own.set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
                        e.post(to, Long.toString(seq), tensor);
                    }
                    seq++;
                    continue;
                }
                long got;
                synchronized (ring) {
                    got = ringCount[0] - ringCount[1];
                    for (long k = 0; k < got && misnamed == null; k++) {
                        long s = ring[(int) (ringCount[1]++ & (ring.length - 1))];
                        int slot = (int) (s % window);
                        if (slots[slot] != s) {
                            misnamed = "told " + s + " while " + slots[slot] + " was in its slot";
                        }
                        slots[slot] = -1;
                        told++;
                    }
                }
                if (got > 0) {
                    lastOutcome = System.nanoTime();
                } else if (draining && told == seq) {
                    break;
                } else if (System.nanoTime() - lastOutcome > TimeUnit.SECONDS.toNanos(30)) {
                    misnamed = "no outcome for 30 s: posted " + seq + ", told " + told;
                } else {
                    LockSupport.parkNanos(10_000);
                }
            }
        }
        System.out.println("RESULT posted=" + seq + " told=" + told + " stopped=" + (misnamed != null)
            + (misnamed == null ? "" : " why=" + misnamed.replace(' ', '_')));
    }

    private static void sink(Deployment deployment, long micros) {
        AtomicLong got = new AtomicLong();
        boolean[] ended = new boolean[1];
        try (TensorEndpoint e = TensorEndpoint.open(deployment)) {
            System.out.println("READY");
            Path stop = Path.of(System.getenv("MSTAR_SHM_DIR"), "stop-" + deployment.entity());
            while (!ended[0] && !Files.exists(stop)) {
                e.receive(t -> {
                    LockSupport.parkNanos(micros * 1000);
                    got.incrementAndGet();
                    ended[0] |= t.requestId().toString().equals("end");
                }, Duration.ofMillis(200));
            }
            System.out.println("RESULT got=" + got.get());
        }
    }
}
