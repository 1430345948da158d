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
 * every outcome with no further post. It also draws what its listener does besides counting (nothing; post a
 * follow-up tensor for each outcome, or claim and post one, as a request loop does; poll outcomes from inside
 * the listener), a window of 1 to 4,096, and whether it ends by closing with tensors in flight (every post then
 * told once, DELIVERED or CLOSED, by the time close returns; a post that threw told nothing). The consumer draws
 * {@code receive}, {@code poll} in a loop, keeping some tensors past the handler and closing them later, or a
 * handler that throws an Error now and then, which the loop catches before it receives again; given
 * a stage's downstream entity, it is a pipeline stage whose handler forwards each tensor there under a window of
 * its own that its listener releases, and once a run blocks for up to 5 s.
 * Usage: {@code producer ENTITY SEED MILLIS CONSUMER,...} or {@code consumer ENTITY SEED [DOWNSTREAM]}.
 */
public final class UsageWorker {
    /** Longest an outcome may take while its consumer lives. */
    static final long OUTCOME_BOUND_MS = 10_000;
    private static final int[] WINDOWS = {1, 8, 64, 64, 512, 4096};
    /** A listener running deeper than this re-entered the telling. */
    private static final int DEEPEST_LISTENER = 150;
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
        } else if (args.length > 3) {
            stage(deployment, r, args[3]);
        } else {
            consume(deployment, r);
        }
        System.exit(0);
    }

    private enum Form { POST, CLAIM_POST, SEND, WRITER, SEND_CLAIM }

    private enum Window { IN_LISTENER, COUNTED, AWAIT }

    private enum AlsoReads { NO, POLL, RECEIVE }

    private enum ListenerDoes { COUNTS, POSTS, CLAIMS, POLLS }

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
        private boolean toldWhenPolled;
        private Window windowMode;
        private final AlsoReads alsoReads;
        private ListenerDoes listenerDoes;
        private int window;
        private boolean closeInFlight;
        private final long seed;
        private Semaphore places;
        private final Set<String> threw = ConcurrentHashMap.newKeySet(); // posts that threw: told nothing
        private final AtomicLong followUps = new AtomicLong();
        private final ThreadLocal<MemorySegment> followUpBytes =
            ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[4096]));
        private volatile long sendEndMs = Long.MAX_VALUE;
        private volatile boolean closing;
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
            this.windowMode = Window.values()[r.nextInt(Window.values().length)];
            this.toldWhenPolled = windowMode == Window.AWAIT || r.nextBoolean();
            this.alsoReads = AlsoReads.values()[r.nextInt(AlsoReads.values().length)];
            this.listenerDoes = ListenerDoes.values()[r.nextInt(ListenerDoes.values().length)];
            this.window = WINDOWS[r.nextInt(WINDOWS.length)];
            this.places = new Semaphore(window);
            this.closeInFlight = r.nextInt(4) == 0;
            String forced = System.getProperty("usage.forced", ""); // a negative control's class, every run
            if (forced.contains("listenerPosts")) {
                listenerDoes = ListenerDoes.POSTS;
                window = 4096;
                places = new Semaphore(window);
            }
            if (forced.contains("closePolled")) {
                closeInFlight = true;
                toldWhenPolled = true;
                windowMode = Window.AWAIT;
            }
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
            if (threw.contains(id)) {
                OUT.println("VIOLATION told-a-post-that-threw " + id);
            }
            Posted p = pending.remove(id);
            if (p == null) {
                OUT.println("VIOLATION told-unposted " + id);
            } else {
                p.told(msb, lsb);
            }
            if (failure != null && !(closing && failure.startsWith("CLOSED"))) {
                OUT.println("VIOLATION failed " + id + " " + failure);
            }
            boolean followUp = id.contains("-f");
            if (!followUp) { // a follow-up took no place of the window
                switch (windowMode) {
                    case COUNTED -> {
                        synchronized (toldRing) {
                            toldRing.add(id);
                        }
                    }
                    default -> places.release();
                }
            }
            int depth = StackWalker.getInstance().walk(frames -> (int) frames.count());
            if (depth > DEEPEST_LISTENER) {
                OUT.println("VIOLATION deep-listener " + id + " frames=" + depth);
            }
            switch (listenerDoes) {
                case POSTS, CLAIMS -> {
                    if (!followUp) {
                        followUp(); // a request loop: each outcome sends the next request
                    }
                }
                case POLLS -> {
                    if (toldWhenPolled) {
                        endpoint.pollOutcomes(64); // from inside the listener: tells nothing more, grows nothing
                    }
                }
                case COUNTS -> { }
            }
        }

        // One tensor posted from inside the listener, to the first consumer; a post that throws is told nothing.
        private void followUp() {
            if (System.currentTimeMillis() > sendEndMs) {
                return;
            }
            String id = deployment.entity() + "-f" + followUps.getAndIncrement();
            String to = consumers.get(0);
            Posted p = new Posted(id);
            pending.put(id, p);
            posted.incrementAndGet();
            try {
                if (listenerDoes == ListenerDoes.POSTS) {
                    MemorySegment own = followUpBytes.get();
                    ChaosWorker.fill(own, own.byteSize(), id);
                    p.posted(1, 0, endpoint.post(to, id, Tensor.of(DType.U8, own, own.byteSize())));
                } else {
                    try (TensorClaim claim = endpoint.claim(id, DType.U8, 4096)) {
                        ChaosWorker.fill(claim.memory(), 4096, id);
                        p.posted(2, claim.uuidMsb(), claim.uuidLsb());
                        endpoint.post(to, claim);
                    }
                }
            } catch (IllegalStateException e) { // the endpoint closed under it
                threw.add(id);
                if (pending.remove(id) != null) {
                    posted.decrementAndGet();
                }
                if (!closing) {
                    OUT.println("VIOLATION threw " + e.toString().replace('\n', ' '));
                }
            }
        }

        void run(long millis) throws Exception {
            OUT.println("CONFIG " + deployment.entity() + " threads=" + threads + " toldWhenPolled=" + toldWhenPolled
                + " window=" + windowMode + ":" + window + " alsoReads=" + alsoReads + " listener=" + listenerDoes
                + " closeInFlight=" + closeInFlight);
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
                sendEndMs = end;
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
                if (closeInFlight) { // with tensors in flight: close tells each once, on this thread if need be
                    stopping = true;
                    if (receiver != null) {
                        receiver.join();
                    }
                    closing = true;
                    e.close();
                    if (!pending.isEmpty()) {
                        OUT.println("VIOLATION untold-after-close " + pending.size() + " e.g. "
                            + pending.keySet().iterator().next());
                    }
                } else {
                    awaitAll(System.currentTimeMillis() + OUTCOME_BOUND_MS + 2000);
                }
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
                        if (toldWhenPolled && windowMode != Window.AWAIT) {
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
                switch (windowMode) {
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
                if (windowMode == Window.COUNTED) {
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

    /**
     * A pipeline stage: each tensor received is forwarded to {@code downstream} from inside the handler, under a
     * window of its own (1 to 8 permits) that its listener releases; once, the handler blocks for up to 5 s.
     * Its ACKs must go on being read meanwhile, or the window never opens again ({@code stage-stuck}).
     */
    private static void stage(Deployment deployment, SplittableRandom r, String downstream) throws Exception {
        int window = 1 + r.nextInt(8);
        OUT.println("CONFIG " + deployment.entity() + " mode=stage window=" + window + " downstream=" + downstream);
        Semaphore permits = new Semaphore(window);
        Set<String> forwarded = ConcurrentHashMap.newKeySet();
        Set<String> told = ConcurrentHashMap.newKeySet();
        DeliveryListener releases = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                heard(requestId);
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                heard(requestId); // the sink stopping first at the end of a run: not a violation here
            }

            private void heard(String id) {
                if (!told.add(id)) {
                    OUT.println("VIOLATION stage-told-twice " + id);
                }
                if (!forwarded.contains(id)) {
                    OUT.println("VIOLATION stage-told-unposted " + id);
                }
                permits.release();
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, releases)) {
            if (!endpoint.awaitPeer(downstream, Duration.ofSeconds(60))) {
                throw new IllegalStateException("no downstream: " + downstream);
            }
            OUT.println("READY " + deployment.entity());
            boolean[] blocked = new boolean[1];
            TensorHandler forward = t -> {
                String id = t.requestId().toString();
                if (!blocked[0] && r.nextInt(500) == 0) { // once a run: a producer's outcome waits behind it
                    blocked[0] = true;
                    LockSupport.parkNanos(r.nextLong(5_000_000_000L)); // a GPU queue, a bounded executor, a slow call
                }
                try {
                    if (!permits.tryAcquire(UsageWorker.OUTCOME_BOUND_MS, TimeUnit.MILLISECONDS)) {
                        OUT.println("VIOLATION stage-stuck " + id + ": no outcome of its own for "
                            + UsageWorker.OUTCOME_BOUND_MS + " ms");
                        return;
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                forwarded.add(id);
                endpoint.post(downstream, id, Tensor.of(DType.U8, t.data(), t.nbytes()));
            };
            while (true) { // until the campaign stops this process (SIGTERM)
                endpoint.receive(forward, Duration.ofMillis(100));
            }
        }
    }

    private static void consume(Deployment deployment, SplittableRandom r) {
        // 0 receive, 1 poll in a loop, 2 receive and keep some for later, 3 receive with a handler that throws an
        // Error now and then (the loop catches it and receives again)
        int mode = System.getProperty("usage.forced", "").equals("throws") ? 3 : r.nextInt(4);
        OUT.println("CONFIG " + deployment.entity() + " mode=" + List.of("receive", "poll", "keep", "throws").get(mode));
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
            if (mode == 3 && r.nextInt(16) == 0) {
                throw new AssertionError("a handler's Error, handled tensor " + id);
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            OUT.println("READY " + deployment.entity());
            while (true) { // until the campaign stops this process (SIGTERM)
                int read;
                try {
                    read = mode == 1 ? endpoint.poll(check, 1 + r.nextInt(64)) : endpoint.receive(check, Duration.ofMillis(100));
                } catch (AssertionError thrown) {
                    read = 1; // the application caught its handler's Error and reads on
                }
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
