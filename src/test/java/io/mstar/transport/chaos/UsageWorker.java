package io.mstar.transport.chaos;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.lifecycle.ParentWatch;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * One process of the API-usage campaign ({@link UsageCampaign}): a producer or a consumer that calls the exported
 * API in a way drawn from its seed, as different applications would write it. Every line it prints is an event
 * the campaign reads; {@code VIOLATION} lines break the invariant:
 * <ul>
 *   <li>producer: every post gets exactly one outcome, within {@link #OUTCOME_BOUND_MS} while its consumer lives,
 *       naming that tensor's request id and uuid, and it is DELIVERED (nothing here kills a consumer);</li>
 *   <li>consumer: every tensor handed to it carries its request id's bytes, and none is handed twice.</li>
 * </ul>
 * The producer draws: 1 to 3 sending threads; a listener told as outcomes are learned or when polled; a window
 * of 64 released in the listener, counted by the sending threads from a ring the listener fills, or waited for
 * with {@code awaitOutcomes}; whether its threads also {@code poll} or a thread of it {@code receive}s; per
 * tensor the form ({@code post} of its own buffer, claim and {@code post}, {@code send} with a {@link Delivery},
 * the writer form, {@code send} of a claim) and the size; and bursts, each followed, at random, by a wait for
 * every outcome with no further post. The consumer draws {@code receive}, {@code poll} in a loop, or keeping
 * some tensors past the handler and closing them later.
 * Usage: {@code producer ENTITY SEED MILLIS CONSUMER,...} or {@code consumer ENTITY SEED}.
 */
public final class UsageWorker {
    /** Longest an outcome may take while its consumer lives. */
    static final long OUTCOME_BOUND_MS = 10_000;
    private static final int WINDOW = 64;
    private static final int MAX_BYTES = 1 << 20;
    private static final PrintStream OUT = new PrintStream(System.out, true);

    private UsageWorker() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Deployment deployment = Deployment.fromEnvironment("usage", args[1]);
        SplittableRandom r = new SplittableRandom(Long.parseLong(args[2]));
        if (args[0].equals("producer")) {
            new Producer(deployment, r, List.of(args[4].split(","))).run(Long.parseLong(args[3]));
        } else {
            consume(deployment, r);
        }
        System.exit(0);
    }

    private enum Form { POST, CLAIM_POST, SEND, WRITER, SEND_CLAIM }

    private enum Window { IN_LISTENER, COUNTED, AWAIT }

    private enum AlsoReads { NO, POLL, RECEIVE }

    /**
     * A tensor posted: the uuid its post gave and the one its outcome named, compared once both are known (an
     * outcome may be told before its post returns, on another thread or inside the post).
     */
    private static final class Posted {
        final String id;
        final long atMs = System.currentTimeMillis();
        private long postedMsb;
        private long postedLsb;
        private int postedHalves = -1; // -1 not returned yet, 0 a Delivery (no uuid), 1 the low half, 2 both
        private long toldMsb;
        private long toldLsb;
        private boolean isTold;
        boolean late;

        Posted(String id) {
            this.id = id;
        }

        synchronized void posted(int halves, long msb, long lsb) {
            postedHalves = halves;
            postedMsb = msb;
            postedLsb = lsb;
            compare();
        }

        synchronized void told(long msb, long lsb) {
            isTold = true;
            toldMsb = msb;
            toldLsb = lsb;
            compare();
        }

        private void compare() {
            if (!isTold || postedHalves < 0) {
                return;
            }
            if (postedHalves >= 1 && postedLsb != toldLsb || postedHalves == 2 && postedMsb != toldMsb) {
                OUT.println("VIOLATION misnamed " + id + " posted=" + Long.toHexString(postedMsb) + ":"
                    + Long.toHexString(postedLsb) + " told=" + Long.toHexString(toldMsb) + ":" + Long.toHexString(toldLsb));
            }
        }
    }

    private static final class Producer implements DeliveryListener {
        private final Deployment deployment;
        private final List<String> consumers;
        private final int threads;
        private final boolean toldWhenPolled;
        private final Window window;
        private final AlsoReads alsoReads;
        private final long seed;
        private final Semaphore places = new Semaphore(WINDOW);
        private final ArrayDeque<String> toldRing = new ArrayDeque<>(); // COUNTED: filled by the listener
        private final Map<String, Posted> pending = new ConcurrentHashMap<>();
        private final Set<String> told = ConcurrentHashMap.newKeySet();
        private final AtomicLong posted = new AtomicLong();
        private final AtomicLong outcomes = new AtomicLong();
        private volatile TensorEndpoint endpoint;
        private volatile boolean stopping;

        Producer(Deployment deployment, SplittableRandom r, List<String> consumers) {
            this.deployment = deployment;
            this.consumers = consumers;
            this.threads = 1 + r.nextInt(3);
            this.window = Window.values()[r.nextInt(Window.values().length)];
            this.toldWhenPolled = window == Window.AWAIT || r.nextBoolean();
            this.alsoReads = AlsoReads.values()[r.nextInt(AlsoReads.values().length)];
            this.seed = r.nextLong();
        }

        @Override
        public boolean toldWhenPolled() {
            return toldWhenPolled;
        }

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            told(requestId, uuidMsb, uuidLsb, null);
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            told(requestId, uuidMsb, uuidLsb, failure + ": " + detail);
        }

        private void told(String id, long msb, long lsb, String failure) {
            outcomes.incrementAndGet();
            if (!told.add(id)) {
                OUT.println("VIOLATION told-twice " + id + " uuid=" + Long.toHexString(msb) + Long.toHexString(lsb));
            }
            Posted p = pending.remove(id);
            if (p == null) {
                OUT.println("VIOLATION told-unposted " + id);
            } else {
                p.told(msb, lsb);
            }
            if (failure != null) {
                OUT.println("VIOLATION failed " + id + " " + failure);
            }
            switch (window) {
                case COUNTED -> {
                    synchronized (toldRing) {
                        toldRing.add(id);
                    }
                }
                default -> places.release();
            }
        }

        void run(long millis) throws Exception {
            OUT.println("CONFIG " + deployment.entity() + " threads=" + threads + " toldWhenPolled=" + toldWhenPolled
                + " window=" + window + " alsoReads=" + alsoReads);
            try (TensorEndpoint e = TensorEndpoint.open(deployment, this)) {
                endpoint = e;
                for (String c : consumers) {
                    if (!e.awaitPeer(c, Duration.ofSeconds(60))) {
                        throw new IllegalStateException("consumer did not start: " + c);
                    }
                }
                OUT.println("READY " + deployment.entity());
                Thread receiver = alsoReads == AlsoReads.RECEIVE ? Thread.ofPlatform().daemon().start(() -> {
                    while (!stopping) {
                        e.receive(t -> { }, Duration.ofMillis(100));
                    }
                }) : null;
                long end = System.currentTimeMillis() + millis;
                List<Thread> senders = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    long threadSeed = seed + t;
                    int index = t;
                    senders.add(Thread.ofPlatform().name("sender-" + t).start(() -> send(index, threadSeed, end)));
                }
                Thread checker = Thread.ofPlatform().daemon().start(this::checkLate);
                for (Thread s : senders) {
                    s.join();
                }
                awaitAll(System.currentTimeMillis() + OUTCOME_BOUND_MS + 2000);
                stopping = true;
                checker.join();
                if (receiver != null) {
                    receiver.join();
                }
                OUT.println("SUMMARY " + deployment.entity() + " posted=" + posted.get() + " told=" + outcomes.get()
                    + " pending=" + pending.size());
            }
        }

        private void send(int thread, long threadSeed, long endMs) {
            SplittableRandom r = new SplittableRandom(threadSeed);
            long[] shape = new long[1];
            long seq = 0;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment own = arena.allocate(MAX_BYTES, 4096);
                while (System.currentTimeMillis() < endMs) {
                    int burst = 1 + r.nextInt(r.nextBoolean() ? 8 : 200);
                    for (int b = 0; b < burst && System.currentTimeMillis() < endMs; b++) {
                        takePlace();
                        String id = deployment.entity() + "-t" + thread + "-" + seq++;
                        String to = consumers.get(r.nextInt(consumers.size()));
                        long nbytes = size(r);
                        shape[0] = nbytes;
                        sendOne(Form.values()[r.nextInt(Form.values().length)], id, to, nbytes, shape, own, r);
                        if (alsoReads == AlsoReads.POLL) {
                            endpoint.poll(t -> { }, 64);
                        }
                        if (toldWhenPolled && window != Window.AWAIT) {
                            endpoint.pollOutcomes(64);
                        }
                    }
                    if (r.nextInt(4) == 0) { // a burst, then a wait for every outcome with no further post
                        awaitAll(System.currentTimeMillis() + OUTCOME_BOUND_MS + 2000);
                    }
                }
            } catch (RuntimeException | InterruptedException e) {
                OUT.println("VIOLATION threw " + e.toString().replace('\n', ' '));
            }
        }

        private void sendOne(Form form, String id, String to, long nbytes, long[] shape, MemorySegment own,
                             SplittableRandom r) throws InterruptedException {
            Posted p = new Posted(id);
            pending.put(id, p); // before the post: its outcome may come before the post returns
            posted.incrementAndGet();
            switch (form) {
                case POST -> {
                    ChaosWorker.fill(own, nbytes, id);
                    p.posted(1, 0, endpoint.post(to, id, Tensor.of(DType.U8, own.asSlice(0, nbytes), nbytes)));
                }
                case WRITER -> {
                    p.posted(1, 0, endpoint.post(to, id, DType.U8, shape, slot -> ChaosWorker.fill(slot, nbytes, id)));
                }
                case CLAIM_POST, SEND_CLAIM -> {
                    try (TensorClaim claim = endpoint.claim(id, DType.U8, shape)) {
                        ChaosWorker.fill(claim.memory(), nbytes, id);
                        p.posted(2, claim.uuidMsb(), claim.uuidLsb()); // read before the post, as a user would
                        if (form == Form.CLAIM_POST) {
                            endpoint.post(to, claim);
                        } else {
                            awaitSometimes(endpoint.send(to, claim), id, r);
                        }
                    }
                }
                case SEND -> {
                    ChaosWorker.fill(own, nbytes, id);
                    p.posted(0, 0, 0); // a Delivery names no uuid: its request id is checked
                    awaitSometimes(endpoint.send(to, id, Tensor.of(DType.U8, own.asSlice(0, nbytes), nbytes)), id, r);
                }
            }
        }

        private void awaitSometimes(Delivery delivery, String id, SplittableRandom r) throws InterruptedException {
            if (r.nextInt(8) != 0) {
                return;
            }
            if (toldWhenPolled) { // this thread's poll may be what tells it: poll while waiting
                long deadline = System.nanoTime() + OUTCOME_BOUND_MS * 1_000_000L;
                while (!delivery.isDone() && System.nanoTime() < deadline) {
                    endpoint.awaitOutcomes(64, Duration.ofMillis(10));
                }
            }
            Delivery.Status status = delivery.await(Duration.ofMillis(OUTCOME_BOUND_MS));
            if (status != Delivery.Status.DELIVERED) {
                OUT.println("VIOLATION delivery " + id + " " + delivery);
            }
        }

        // One place of the window of 64: released as the window mode says.
        private void takePlace() throws InterruptedException {
            int spins = 0;
            while (!places.tryAcquire()) {
                switch (window) {
                    case IN_LISTENER -> {
                        if (toldWhenPolled) {
                            endpoint.pollOutcomes(64);
                        }
                        if (!toldWhenPolled && places.tryAcquire(10, TimeUnit.MILLISECONDS)) {
                            return;
                        }
                    }
                    case COUNTED -> {
                        if (toldWhenPolled) {
                            endpoint.pollOutcomes(64);
                        }
                        if (takeCounted() == 0) {
                            backoff(spins++); // the outside benchmark's backoff: spin, yield, park 1 to 100 us
                        }
                    }
                    case AWAIT -> endpoint.awaitOutcomes(64, Duration.ofMillis(100));
                }
            }
        }

        private int takeCounted() {
            int n;
            synchronized (toldRing) {
                n = toldRing.size();
                toldRing.clear();
            }
            places.release(n);
            return n;
        }

        private static void backoff(int spins) {
            if (spins < 16) {
                Thread.onSpinWait();
            } else if (spins < 24) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(Math.min(100_000, 1000L << Math.min(7, spins - 24)));
            }
        }

        // Waits until no post of this process waits for its outcome, polling as its listener needs.
        private void awaitAll(long deadlineMs) throws InterruptedException {
            while (!pending.isEmpty() && System.currentTimeMillis() < deadlineMs) {
                if (toldWhenPolled) {
                    endpoint.awaitOutcomes(64, Duration.ofMillis(10));
                } else {
                    Thread.sleep(1);
                }
                if (window == Window.COUNTED) {
                    takeCounted();
                }
            }
        }

        private void checkLate() {
            while (!stopping) {
                long now = System.currentTimeMillis();
                pending.forEach((id, p) -> {
                    if (!p.late && now - p.atMs > OUTCOME_BOUND_MS) {
                        p.late = true;
                        OUT.println("VIOLATION late " + id + " waited=" + (now - p.atMs) + "ms");
                    }
                });
                LockSupport.parkNanos(200_000_000L);
            }
        }
    }

    private static long size(SplittableRandom r) {
        return switch (r.nextInt(10)) {
            case 0 -> 0;
            case 1 -> 1 + r.nextInt(300);
            case 2, 3, 4, 5 -> 4096;
            case 6, 7 -> 64 << 10;
            case 8 -> 1 + r.nextInt(256 << 10);
            default -> 1 + r.nextInt(MAX_BYTES);
        };
    }

    private static void consume(Deployment deployment, SplittableRandom r) {
        int mode = r.nextInt(3); // 0 receive, 1 poll in a loop, 2 receive and keep some for later
        OUT.println("CONFIG " + deployment.entity() + " mode=" + List.of("receive", "poll", "keep").get(mode));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        ArrayDeque<ReceivedTensor> kept = new ArrayDeque<>();
        AtomicLong got = new AtomicLong();
        TensorHandler check = t -> {
            String id = t.requestId().toString();
            if (!seen.add(id)) {
                OUT.println("VIOLATION handed-twice " + id);
            }
            long wrong = ChaosWorker.firstWrong(t.memory(), t.offset(), t.nbytes(), id);
            if (wrong != -2) {
                OUT.println("VIOLATION bad-bytes " + id + " at=" + wrong);
            }
            got.incrementAndGet();
            if (mode == 2 && r.nextInt(4) == 0) {
                kept.add(t.keep());
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            OUT.println("READY " + deployment.entity());
            while (true) { // until the campaign stops this process (SIGTERM)
                int read = mode == 1 ? endpoint.poll(check, 1 + r.nextInt(64)) : endpoint.receive(check, Duration.ofMillis(100));
                if (mode == 1 && read == 0) {
                    LockSupport.parkNanos(r.nextInt(50_000));
                }
                while (kept.size() > r.nextInt(16)) {
                    kept.poll().close();
                }
                if (read == 0) {
                    kept.forEach(ReceivedTensor::close);
                    kept.clear();
                }
            }
        }
    }
}
