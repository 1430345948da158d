package io.mstar.transport.chaos;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.IncomingTensor;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.lifecycle.ParentWatch;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * One process of the fault campaign ({@link FaultCampaignTest}), a producer or a consumer, through the exported
 * API only. Every line it prints is an event the campaign checks; lines are flushed at once, so a SIGKILL
 * loses none already printed.
 * <ul>
 *   <li>producer: sends tensors of random sizes (0 bytes to above a segment) to random sets of consumers, by
 *       {@code send}, {@code post} and claims, each payload derived from its request id word by word; prints
 *       {@code OUT id status failure} per outcome, {@code LATE id} for one not told within the bound, and
 *       {@code SUMMARY} when it has drained;</li>
 *   <li>consumer: checks every byte it is handed against the request id's payload, keeps some tensors past
 *       the handler; prints {@code GOT id}, {@code BAD id word} and {@code DUP id}.</li>
 * </ul>
 * The pipeline of {@link RestartPipelineTest} uses two more roles: {@code pipeline} (a producer posting to
 * {@code middle}, with a fan-out to {@code sink} and {@code sink2} every 10th tensor) and {@code middle} (a
 * consumer that posts a tensor derived from each it is handed to the next stage).
 * Usage: {@code producer ENTITY SEED MILLIS CONSUMER,...}, {@code consumer ENTITY SEED},
 * {@code pipeline ENTITY SEED COUNT INTERVAL_MS} or {@code middle ENTITY SEED NEXT}.
 */
public final class ChaosWorker {
    /** Longest an outcome may take while its producer lives (a dead consumer is found within about a second). */
    static final long OUTCOME_BOUND_MS = 10_000;
    private static final int WINDOW = 64;
    private static final int SEGMENT_BYTES = 4 << 20; // the campaign's MSTAR_SHM_ARENA_SEGMENT_MB
    private static final PrintStream OUT = new PrintStream(System.out, true);

    private ChaosWorker() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        String role = args[0];
        String entity = args[1];
        long seed = Long.parseLong(args[2]);
        Deployment deployment = Deployment.fromEnvironment("chaos", entity);
        SplittableRandom r = new SplittableRandom(seed);
        switch (role) {
            case "producer" -> produce(deployment, r, Long.parseLong(args[3]), List.of(args[4].split(",")));
            case "pipeline" -> pipeline(deployment, r, Integer.parseInt(args[3]), Long.parseLong(args[4]));
            case "middle" -> middle(deployment, r, args[3]);
            case "slow-consumer" -> slowConsumer(deployment);
            default -> consume(deployment, r);
        }
    }

    /** The payload of request {@code id}: word k is a mix of the id's hash and k, so any other tensor differs. */
    static long word(long key, long k) {
        long z = key + (k + 1) * 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static long key(CharSequence id) {
        long h = 1125899906842597L;
        for (int i = 0; i < id.length(); i++) {
            h = 31 * h + id.charAt(i);
        }
        return h;
    }

    public static void fill(MemorySegment out, long nbytes, CharSequence id) {
        long key = key(id);
        long words = nbytes / 8;
        for (long k = 0; k < words; k++) {
            out.set(ValueLayout.JAVA_LONG_UNALIGNED, 8 * k, word(key, k));
        }
        long last = word(key, words);
        for (long b = 8 * words; b < nbytes; b++) {
            out.set(ValueLayout.JAVA_BYTE, b, (byte) (last >>> (8 * (b - 8 * words))));
        }
    }

    /** The first word (or trailing byte, as -1 - index) that differs from the payload, or -2 when all match. */
    static long firstWrong(MemorySegment in, long at, long nbytes, CharSequence id) {
        long key = key(id);
        long words = nbytes / 8;
        for (long k = 0; k < words; k++) {
            if (in.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 8 * k) != word(key, k)) {
                return k;
            }
        }
        long last = word(key, words);
        for (long b = 8 * words; b < nbytes; b++) {
            if (in.get(ValueLayout.JAVA_BYTE, at + b) != (byte) (last >>> (8 * (b - 8 * words)))) {
                return -1 - b;
            }
        }
        return -2;
    }

    private static long size(SplittableRandom r) {
        if (r.nextInt(25) == 0) { // larger than a socket's buffers: part of it waits in the sender's queue
            return (16 << 20) + r.nextInt(8 << 20);
        }
        return switch (r.nextInt(10)) {
            case 0 -> 0;
            case 1 -> 1 + r.nextInt(300); // odd sizes: a trailing partial word
            case 2, 3, 4 -> 4096;
            case 5, 6 -> 64 << 10;
            case 7 -> 256 << 10;
            case 8 -> 1 + r.nextInt(SEGMENT_BYTES);
            default -> SEGMENT_BYTES + r.nextInt(SEGMENT_BYTES); // above a segment: a dedicated one, or a spill
        };
    }

    /** The tensors a process sent and the outcome of each, told once; one not told within the bound is LATE. */
    private static final class Tracker implements DeliveryListener {
        final Map<String, long[]> pending = new ConcurrentHashMap<>(); // id -> {sent at ms, late told}

        void sent(String id, String to, long nbytes) {
            pending.put(id, new long[] {System.currentTimeMillis(), 0});
            OUT.println("SENT " + id + " " + to + " " + nbytes);
        }

        void notSent(String id, RuntimeException e) {
            pending.remove(id);
            OUT.println("ERR " + id + " " + e.toString().replace('\n', ' '));
        }

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            told(requestId, "DELIVERED -");
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            told(requestId, "FAILED " + failure + (detail != null && detail.contains("reused") ? " STALE" : ""));
        }

        private void told(String id, String what) {
            if (pending.remove(id) == null) {
                OUT.println("UNTRACKED " + id + " " + what);
            }
            OUT.println("OUT " + id + " " + what);
        }

        void checkLate() {
            long now = System.currentTimeMillis();
            pending.forEach((id, p) -> {
                if (p[1] == 0 && now - p[0] > OUTCOME_BOUND_MS) {
                    p[1] = 1;
                    OUT.println("LATE " + id + " " + (now - p[0]) + "ms");
                }
            });
        }

        /** Waits for the outcomes still pending, up to the bound and a little; prints the summary. */
        void drain(String entity, int sent) throws InterruptedException {
            long drainEnd = System.currentTimeMillis() + OUTCOME_BOUND_MS + 2000;
            while (!pending.isEmpty() && System.currentTimeMillis() < drainEnd) {
                checkLate();
                Thread.sleep(10);
            }
            checkLate();
            OUT.println("SUMMARY " + entity + " sent=" + sent + " pending=" + pending.size());
        }
    }

    // Two sending threads, as a worker with a thread per stage would have: one sends to every consumer, the
    // other only to the consumers on this node (names not starting with "r"), so that while a stopped remote
    // reader blocks the first, the second keeps reusing the slots that the timeouts free.
    private static void produce(Deployment deployment, SplittableRandom r, long millis, List<String> consumers)
        throws InterruptedException {
        Tracker tracker = new Tracker();
        String nonce = Long.toHexString(r.nextLong() >>> 16);
        long end = System.currentTimeMillis() + millis;
        List<String> local = consumers.stream().filter(c -> !c.startsWith("r")).toList();
        int[] sent = new int[2];
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, tracker)) {
            endpoint.prepareToSend();
            OUT.println("READY " + deployment.entity());
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int thread = t;
                SplittableRandom tr = r.split();
                List<String> to = thread == 0 ? consumers : local;
                threads.add(Thread.ofPlatform().start(() -> sent[thread] = sendUntil(endpoint, tracker, tr, end,
                    deployment.entity() + "-" + nonce + "-" + thread + "-", to)));
            }
            for (Thread t : threads) {
                t.join();
            }
            tracker.drain(deployment.entity(), sent[0] + sent[1]);
        }
    }

    // One sending thread's loop; returns how many it sent.
    private static int sendUntil(TensorEndpoint endpoint, Tracker tracker, SplittableRandom r, long end, String prefix,
                                 List<String> consumers) {
        int seq = 0;
        try {
            while (System.currentTimeMillis() < end) {
                tracker.checkLate();
                if (tracker.pending.size() >= WINDOW) {
                    Thread.sleep(1);
                    continue;
                }
                String id = prefix + seq++;
                List<String> to = targets(r, consumers);
                long nbytes = size(r);
                tracker.sent(id, String.join(",", to), nbytes);
                try {
                    send(endpoint, r, id, to, nbytes);
                } catch (RuntimeException e) {
                    tracker.notSent(id, e);
                }
                if (r.nextInt(4) == 0) {
                    Thread.sleep(r.nextInt(3));
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return seq;
    }

    private static List<String> targets(SplittableRandom r, List<String> consumers) {
        if (r.nextInt(3) > 0) {
            return List.of(consumers.get(r.nextInt(consumers.size())));
        }
        List<String> chosen = new ArrayList<>();
        for (String c : consumers) {
            if (r.nextBoolean()) {
                chosen.add(c);
            }
        }
        return chosen.isEmpty() ? List.of(consumers.getFirst()) : chosen;
    }

    private static void send(TensorEndpoint endpoint, SplittableRandom r, String id, List<String> to, long nbytes) {
        if (to.size() > 1) {
            endpoint.send(to, id, tensor(id, nbytes));
            return;
        }
        switch (r.nextInt(3)) {
            case 0 -> endpoint.send(to.getFirst(), id, tensor(id, nbytes));
            case 1 -> endpoint.post(to.getFirst(), id, tensor(id, nbytes));
            default -> {
                TensorClaim claim = endpoint.claim(id, DType.U8, nbytes);
                fill(claim.memory(), nbytes, id);
                endpoint.post(to.getFirst(), claim);
            }
        }
    }

    private static Tensor tensor(String id, long nbytes) {
        MemorySegment data = MemorySegment.ofArray(new byte[(int) nbytes]);
        fill(data, nbytes, id);
        return Tensor.of(DType.U8, data, nbytes);
    }

    /** What a receiving process checks of every tensor it is handed, and the tensors it keeps past the handler. */
    private static final class Checks {
        private final SplittableRandom r;
        private final Set<String> seen = new HashSet<>();
        private final ArrayDeque<Object[]> kept = new ArrayDeque<>(); // {view, id, release at ms}

        Checks(SplittableRandom r) {
            this.r = r;
        }

        /** Checks a tensor word by word and for a repeat; keeps it with probability {@code 1 / keepOneIn}. */
        String handle(IncomingTensor t, int keepOneIn) {
            String id = t.requestId().toString();
            long wrong = firstWrong(t.memory(), t.offset(), t.nbytes(), id);
            if (wrong != -2) {
                OUT.println("BAD " + id + " " + wrong + " nbytes=" + t.nbytes());
            }
            if (!seen.add(id)) {
                OUT.println("DUP " + id);
            }
            OUT.println("GOT " + id);
            if (r.nextInt(keepOneIn) == 0) {
                kept.add(new Object[] {t.keep(), id, System.currentTimeMillis() + r.nextInt(300)});
            }
            return id;
        }

        /** Checks and closes the kept tensors whose time has come. */
        void closeDue() {
            while (!kept.isEmpty() && (long) kept.peek()[2] <= System.currentTimeMillis()) {
                Object[] k = kept.poll();
                ReceivedTensor view = (ReceivedTensor) k[0];
                long wrong = firstWrong(view.data(), 0, view.data().byteSize(), (String) k[1]);
                if (wrong != -2) {
                    OUT.println("BAD " + k[1] + " " + wrong + " kept");
                }
                view.close();
            }
        }
    }

    private static void consume(Deployment deployment, SplittableRandom r) {
        Checks checks = new Checks(r);
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            OUT.println("READY " + deployment.entity());
            while (true) {
                endpoint.receive(t -> checks.handle(t, 8), Duration.ofMillis(50));
                checks.closeDue();
            }
        }
    }

    /**
     * A consumer whose handler takes a second before it checks the bytes, with a shutdown hook of its own that
     * lets a handler in progress finish (as a worker that finishes its request on SIGTERM does).
     */
    private static void slowConsumer(Deployment deployment) {
        AtomicReference<CountDownLatch> inHandler = new AtomicReference<>(new CountDownLatch(0));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                inHandler.get().await(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            OUT.println("READY " + deployment.entity());
            while (true) {
                endpoint.receive(t -> {
                    CountDownLatch done = new CountDownLatch(1);
                    inHandler.set(done);
                    OUT.println("IN " + t.requestId());
                    try {
                        Thread.sleep(1000);
                        long wrong = firstWrong(t.memory(), t.offset(), t.nbytes(), t.requestId());
                        OUT.println((wrong == -2 ? "GOOD " : "BAD ") + t.requestId() + " " + wrong);
                    } catch (InterruptedException | RuntimeException e) {
                        OUT.println("GONE " + t.requestId() + " " + e);
                    } finally {
                        done.countDown();
                    }
                }, Duration.ofMillis(50));
            }
        }
    }

    /** A pipeline's middle stage: checks what it is handed, and posts a tensor derived from it to {@code next}. */
    private static void middle(Deployment deployment, SplittableRandom r, String next) {
        Checks checks = new Checks(r);
        Tracker tracker = new Tracker();
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, tracker)) {
            OUT.println("READY " + deployment.entity());
            while (true) {
                endpoint.receive(t -> {
                    String out = "m-" + checks.handle(t, 7);
                    tracker.sent(out, next, t.nbytes());
                    try {
                        endpoint.post(next, out, tensor(out, t.nbytes()));
                    } catch (RuntimeException e) {
                        tracker.notSent(out, e);
                    }
                }, Duration.ofMillis(50));
                checks.closeDue();
                tracker.checkLate();
            }
        }
    }

    /**
     * A pipeline's producer: {@code count} tensors of 4 KiB to 8 MiB posted to {@code middle}, one every
     * {@code intervalMs}; every 10th is also sent to {@code sink} and {@code sink2} at once (fan-out).
     */
    private static void pipeline(Deployment deployment, SplittableRandom r, int count, long intervalMs)
        throws InterruptedException {
        Tracker tracker = new Tracker();
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, tracker)) {
            for (String peer : List.of("middle", "sink", "sink2")) {
                if (!endpoint.awaitPeer(peer, Duration.ofSeconds(60))) {
                    throw new IllegalStateException(peer + " did not start");
                }
            }
            OUT.println("READY " + deployment.entity());
            for (int i = 0; i < count; i++) {
                tracker.checkLate();
                String id = "t-" + i;
                long nbytes = 4096L << r.nextInt(12);
                tracker.sent(id, "middle", nbytes);
                try {
                    endpoint.post("middle", id, tensor(id, nbytes));
                } catch (RuntimeException e) {
                    tracker.notSent(id, e);
                }
                if (i % 10 == 0) {
                    String fan = id + "f";
                    tracker.sent(fan, "sink,sink2", nbytes);
                    try {
                        endpoint.send(List.of("sink", "sink2"), fan, tensor(fan, nbytes));
                    } catch (RuntimeException e) {
                        tracker.notSent(fan, e);
                    }
                }
                Thread.sleep(intervalMs);
            }
            tracker.drain(deployment.entity(), count);
        }
    }
}
