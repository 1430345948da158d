package io.mstar.transport.conformance;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.IncomingTensor;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.EntityInUseException;
import io.mstar.transport.lifecycle.ParentWatch;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.locks.LockSupport;

/**
 * The JVM side of the conformance worker protocol; {@code python -m mstar_transport.conformance} is its mirror and
 * takes the same command lines and prints the same lines, so that {@link ConformanceMatrixTest} runs every scenario
 * with either language at either end.
 *
 * <pre>
 * produce ENDPOINT ENTITY TO[,TO2] COUNT SEED WINDOW [SIZE] [--threads N] [--stop-last] [--first-seq S]
 *         [--pace-ms P] [--wait S] [--first-to GHOST] [--pause-ms P] [--pause-at N] [--listener post|raise:N|close:N]
 *         [--close-then-poll] [--no-listener] [--fork child-exits|child-lives]
 * consume ENDPOINT ENTITY COUNT MODE [--idle S] [--fork child-exits|child-lives]
 * </pre>
 *
 * <p>{@code produce} posts COUNT checked tensors (word k of tensor seq holds seq * 0x9E3779B97F4A7C15 + k mod 2^64;
 * request id: seq, or {@code stop} for the last one with {@code --stop-last}), SIZE bytes each or a seeded mix of
 * 4 KiB, 64 KiB and 1 MiB, keeping at most WINDOW untold. A window that stays shut for {@code --wait} seconds (10 by
 * default) ends the posting ({@code STALL}); after the last post it waits up to as long for every outcome, then closes
 * the endpoint (which tells what is still in flight) and prints
 * {@code RESULT posted= raised= delivered= failed= told= duplicates= unknown= settleMs= stalled= unknownAcks=
 * failures={NAME=n, ...}}: posts that returned and that threw, outcomes told (for a request id already told:
 * duplicates; for one never posted or whose post threw: unknown), milliseconds from the last post to the last
 * outcome (-1 if they never all came before the close). {@code --first-to GHOST} posts one tensor (request id
 * {@code ghost}) to GHOST first; {@code --pause-ms} waits that long after READY before the first post, or, with
 * {@code --pause-at N}, before post N (printing {@code PAUSED}). {@code --listener} makes the listener act on each
 * outcome it counts: {@code post} posts the next tensor (a request loop: the poster posts only the first WINDOW),
 * {@code raise:N} throws on every Nth, {@code close:N} closes the endpoint at the Nth (posting stops). With
 * {@code --close-then-poll} the producer closes as soon as it posted, then polls and awaits outcomes five times
 * each; RESULT adds {@code afterClose=} (outcomes told after close returned) and {@code pollErrors=} (calls that
 * threw). {@code --no-listener} (Python) opens with no listener and counts the outcomes the polls return; the JVM
 * needs its polled listener and ignores it. {@code --fork} (Python only: a JVM cannot fork) forks once READY: the
 * child exits at once ({@code child-exits}, running its interpreter's exit) or sleeps 60 s ({@code child-lives}),
 * printing {@code CHILD pid=}.
 *
 * <p>{@code consume} receives up to COUNT tensors, checking every word, until a tensor named {@code stop} or
 * {@code --idle} seconds (15 by default) without one; MODE is {@code plain}, {@code raise:N} (the handler throws on
 * every Nth tensor, the loop receives again), {@code keep} (each tensor kept and released after the next),
 * {@code keep-raise:N}, {@code slow:MS} (the handler takes MS milliseconds after its check), {@code close-on-stop}
 * (closes the endpoint inside the handler of {@code stop}) or
 * {@code stop-after:N} (stops reading after N and stays alive until signalled) or {@code stale-view} (each handler saves
 * the tensor and its bytes' view without {@code keep()}; after the next receive returns, the tensor's accessor and
 * the view are read: an accessor that answers counts {@code openAccessors}, a view that refuses {@code refusedViews},
 * one that shows its own tensor {@code ownViews}, anything else {@code staleViews}). A tensor whose request id starts
 * with {@code forged} is counted {@code forged} and nothing else. It prints {@code READY}, {@code
 * PROGRESS} after the first 1,000 (or when it stops reading), then {@code RESULT received= bad= duplicates= raised=
 * errors= badInput= skipped= forged= staleViews= refusedViews= ownViews= openAccessors=}: {@code badInput} is what
 * the endpoint counted as bad input (JVM: the mailbox's bad messages and garbage records; Python: bad descriptors
 * and refused files), {@code skipped} the ring records it skipped as stuck claims. An endpoint that does not open prints {@code OPEN-FAILED kind=ENTITY_IN_USE|OTHER type=...} and exits 3.
 */
public final class ConformanceWorker {
    static final long GOLDEN = 0x9E3779B97F4A7C15L;
    static final long GOLDEN_INVERSE = inverse(GOLDEN);
    static final int PROGRESS_AT = 1000;
    static final int OPEN_FAILED_EXIT = 3;

    private ConformanceWorker() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Args a = new Args(args);
        TransportConfig config = TransportConfig.from(System.getenv()::get);
        int rc = switch (a.positional(0)) {
            case "produce" -> new Producer(a).run(Deployment.of(config, a.positional(1), a.positional(2)));
            case "consume" -> new Consumer(a).run(Deployment.of(config, a.positional(1), a.positional(2)));
            default -> 2;
        };
        System.out.flush();
        System.exit(rc);
    }

    /** The size of tensor seq: a mix of 80% 4 KiB, 17% 64 KiB and 3% 1 MiB, a function of (seed, seq) alone. */
    static long sizeOf(long seed, long seq) {
        long pick = Long.remainderUnsigned(splitMix64(seed + seq), 100);
        return pick < 80 ? 4096 : pick < 97 ? 65536 : 1 << 20;
    }

    static long splitMix64(long x) {
        long z = x + GOLDEN;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    private static long inverse(long odd) {
        long x = odd; // Newton's iteration doubles the correct low bits each step: 3, 6, 12, 24, 48, 96
        for (int i = 0; i < 5; i++) {
            x *= 2 - odd * x;
        }
        return x;
    }

    static void fill(MemorySegment data, long seq) {
        long base = seq * GOLDEN;
        for (long k = 0; k < data.byteSize() / 8; k++) {
            data.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, k, base + k);
        }
    }

    /** The tensor's seq when every word holds it (from word 0, so a tensor named "stop" needs no number), else -1. */
    static long checkedSeq(MemorySegment data) {
        long n = data.byteSize() / 8;
        if (n == 0 || data.byteSize() % 8 != 0) {
            return -1;
        }
        long base = data.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        for (long k = 1; k < n; k++) {
            if (data.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, k) != base + k) {
                return -1;
            }
        }
        return base * GOLDEN_INVERSE;
    }

    /** {@code {A=1, B=2}}, sorted by name: the same text both languages print. */
    static String counts(Map<String, Long> counts) {
        return new TreeMap<>(counts).toString();
    }

    /** Positional arguments and {@code --name value} / {@code --flag} options. */
    static final class Args {
        private static final Set<String> FLAGS = Set.of("--stop-last", "--close-then-poll", "--no-listener");
        private final List<String> positional = new ArrayList<>();
        private final Map<String, String> options = new HashMap<>();

        Args(String[] args) {
            for (int i = 0; i < args.length; i++) {
                if (FLAGS.contains(args[i])) {
                    options.put(args[i].substring(2), "true");
                } else if (args[i].startsWith("--")) {
                    options.put(args[i].substring(2), args[++i]);
                } else {
                    positional.add(args[i]);
                }
            }
        }

        String positional(int i) {
            return i < positional.size() ? positional.get(i) : null;
        }

        long option(String name, long otherwise) {
            String v = options.get(name);
            return v == null ? otherwise : Long.parseLong(v);
        }

        String option(String name) {
            return options.get(name);
        }
    }

    /** Posts checked tensors under a window and tells every outcome's count; its listener is told when polled. */
    static final class Producer implements DeliveryListener {
        private final List<String> to;
        private final int count;
        private final long seed;
        private final int window;
        private final long fixedSize;
        private final int threads;
        private final boolean stopLast;
        private final long firstSeq;
        private final long paceMs;
        private final long waitNs;
        private final String ghost;
        private final long pauseMs;
        private final long pauseAt;
        private final String listenerMode;
        private final long listenerEvery;
        private final boolean closeThenPoll;
        private volatile TensorEndpoint open;
        private volatile boolean closedByListener;
        private long toldAfterClose;
        private long pollErrors;
        private boolean closeReturned;

        // Guarded by this.
        private final Map<String, Integer> told = new HashMap<>();
        private final Set<String> raisedIds = new HashSet<>();
        private final Set<String> attempted = new HashSet<>();
        private final Map<String, Long> failures = new HashMap<>();
        private final Map<String, Long> errors = new HashMap<>();
        private long posted;
        private long raised;
        private long delivered;
        private long failed;
        private long toldTotal;
        private long duplicates;
        private long unknown;
        private long toldUnique;
        private long lastProgressNs = System.nanoTime();
        private long allToldNs;
        private boolean stalled;
        private long nextSeq;

        Producer(Args a) {
            to = List.of(a.positional(3).split(","));
            count = Integer.parseInt(a.positional(4));
            seed = Long.parseLong(a.positional(5));
            window = Integer.parseInt(a.positional(6));
            fixedSize = a.positional(7) == null ? 0 : Long.parseLong(a.positional(7));
            threads = (int) a.option("threads", 1);
            stopLast = a.option("stop-last") != null;
            firstSeq = a.option("first-seq", 0);
            paceMs = a.option("pace-ms", 0);
            waitNs = a.option("wait", 10) * 1_000_000_000L;
            ghost = a.option("first-to");
            pauseMs = a.option("pause-ms", 0);
            pauseAt = a.option("pause-at", 0);
            String l = a.option("listener") == null ? "count" : a.option("listener");
            int colon = l.indexOf(':');
            listenerMode = colon < 0 ? l : l.substring(0, colon);
            listenerEvery = colon < 0 ? 0 : Long.parseLong(l.substring(colon + 1));
            closeThenPoll = a.option("close-then-poll") != null;
        }

        int run(Deployment deployment) throws Exception {
            long unknownAcks = 0;
            long lastPostNs;
            long settleMs = -1;
            TensorEndpoint endpoint = TensorEndpoint.open(deployment, this);
            open = endpoint;
            try {
                for (String consumer : to) {
                    if (!endpoint.awaitPeer(consumer, Duration.ofSeconds(30))) {
                        System.out.println("NO-PEER " + consumer);
                    }
                }
                System.out.println("READY");
                if (pauseAt == 0) {
                    Thread.sleep(pauseMs);
                }
                if (ghost != null) {
                    postOne(endpoint, List.of(ghost), "ghost", firstSeq, 4096);
                }
                List<Thread> posters = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    Thread poster = new Thread(() -> postAll(endpoint), "poster-" + t);
                    posters.add(poster);
                    poster.start();
                }
                for (Thread poster : posters) {
                    poster.join();
                }
                lastPostNs = System.nanoTime();
                synchronized (this) {
                    lastProgressNs = lastPostNs;
                }
                // a request loop posts from its listener: wait until it posted all, then for their outcomes
                while (!closeThenPoll && !closedByListener && (untold() > 0 || listenerMode.equals("post")
                    && posting()) && System.nanoTime() - lastProgressNs() < waitNs) {
                    try {
                        endpoint.awaitOutcomes(64, Duration.ofMillis(100));
                    } catch (RuntimeException e) {
                        error(e);
                    }
                }
                if (!closedByListener) {
                    unknownAcks = endpoint.stats().transport().unknownAcks();
                }
                synchronized (this) {
                    settleMs = untold() > 0 ? -1 : Math.max(0, (allToldNs - lastPostNs) / 1_000_000);
                }
            } finally {
                try {
                    endpoint.close(); // tells what is still in flight
                } catch (RuntimeException e) {
                    error(e);
                }
                synchronized (this) {
                    closeReturned = true;
                }
            }
            if (closeThenPoll) {
                pollAfterClose(endpoint);
            }
            synchronized (this) {
                if (!errors.isEmpty()) {
                    System.out.println("POST-ERRORS " + counts(errors));
                }
                System.out.println("RESULT posted=" + posted + " raised=" + raised + " delivered=" + delivered
                    + " failed=" + failed + " told=" + toldTotal + " duplicates=" + duplicates + " unknown=" + unknown
                    + " settleMs=" + settleMs + " stalled=" + stalled + " unknownAcks=" + unknownAcks
                    + " afterClose=" + toldAfterClose + " pollErrors=" + pollErrors + " failures=" + counts(failures));
                return toldTotal == posted && duplicates == 0 && unknown == 0 && delivered == posted ? 0 : 1;
            }
        }

        /** After close: polls and awaits outcomes a few times; each call may tell what close left, never throws. */
        private void pollAfterClose(TensorEndpoint endpoint) {
            for (int i = 0; i < 5; i++) {
                try {
                    endpoint.pollOutcomes(64);
                    endpoint.awaitOutcomes(64, Duration.ofMillis(50));
                } catch (RuntimeException e) {
                    synchronized (this) {
                        pollErrors++;
                    }
                    error(e);
                }
            }
        }

        private synchronized long lastProgressNs() {
            return lastProgressNs;
        }

        private synchronized boolean posting() {
            return nextSeq < count;
        }

        private void postAll(TensorEndpoint endpoint) {
            while (true) {
                long seq;
                synchronized (this) {
                    if (stalled || closedByListener || nextSeq >= count
                        || listenerMode.equals("post") && nextSeq >= window) {
                        return; // a request loop's listener posts the rest
                    }
                    seq = firstSeq + nextSeq++;
                }
                if (pauseAt > 0 && seq == firstSeq + pauseAt) {
                    System.out.println("PAUSED");
                    LockSupport.parkNanos(pauseMs * 1_000_000L);
                }
                if (!awaitWindow(endpoint)) {
                    return;
                }
                String id = stopLast && seq == firstSeq + count - 1 ? "stop" : Long.toString(seq);
                postOne(endpoint, to, id, seq, fixedSize > 0 ? fixedSize : sizeOf(seed, seq));
                if (paceMs > 0) {
                    LockSupport.parkNanos(paceMs * 1_000_000L);
                }
            }
        }

        /** Waits until fewer than WINDOW posts are untold; false (and STALL) when no outcome came for the wait. */
        private boolean awaitWindow(TensorEndpoint endpoint) {
            while (true) {
                synchronized (this) {
                    if (stalled || closedByListener) {
                        return false;
                    }
                    if (untold() < window) {
                        return true;
                    }
                    if (System.nanoTime() - lastProgressNs > waitNs) {
                        stalled = true;
                        System.out.println("STALL posted=" + posted + " told=" + toldTotal);
                        return false;
                    }
                }
                try {
                    endpoint.awaitOutcomes(64, Duration.ofMillis(100));
                } catch (RuntimeException e) {
                    error(e);
                }
            }
        }

        private void postOne(TensorEndpoint endpoint, List<String> consumers, String id, long seq, long nbytes) {
            synchronized (this) {
                attempted.add(id);
            }
            try {
                if (consumers.size() == 1) {
                    try (TensorClaim claim = endpoint.claim(id, DType.U8, nbytes)) {
                        fill(claim.memory(), seq);
                        endpoint.post(consumers.getFirst(), claim);
                    }
                } else {
                    MemorySegment data = MemorySegment.ofArray(new long[(int) (nbytes / 8)]);
                    fill(data, seq);
                    endpoint.send(consumers, id, Tensor.of(DType.U8, data, nbytes));
                }
                synchronized (this) {
                    posted++;
                }
            } catch (RuntimeException e) {
                synchronized (this) {
                    raised++;
                    raisedIds.add(id);
                }
                error(e);
            }
        }

        private synchronized void error(RuntimeException e) {
            if (errors.merge(e.getClass().getSimpleName(), 1L, Long::sum) == 1) {
                System.out.println("POST-ERROR " + e);
            }
        }

        private synchronized long untold() {
            return attempted.size() - raised - toldUnique;
        }

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            listen(told(requestId, null));
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            listen(told(requestId, failure.name()));
        }

        /**
         * What the listener does besides counting, outside the lock: {@code post} posts the next tensor (a request
         * loop), {@code raise:N} throws on every Nth outcome, {@code close:N} closes the endpoint at the Nth.
         */
        private void listen(long nth) {
            switch (listenerMode) {
                case "count" -> { }
                case "post" -> {
                    long seq;
                    synchronized (this) {
                        if (closedByListener || nextSeq >= count) {
                            return;
                        }
                        seq = firstSeq + nextSeq++;
                    }
                    postOne(open, to, Long.toString(seq), seq, fixedSize > 0 ? fixedSize : sizeOf(seed, seq));
                }
                case "raise" -> {
                    if (nth % listenerEvery == 0) {
                        throw new ListenerRaised(nth);
                    }
                }
                case "close" -> {
                    if (nth == listenerEvery) {
                        closedByListener = true;
                        open.close();
                    }
                }
                default -> throw new IllegalArgumentException("listener: " + listenerMode);
            }
        }

        /** Counts one outcome; returns how many were told so far. */
        private synchronized long told(String requestId, String failure) {
            toldTotal++;
            if (closeReturned) {
                toldAfterClose++;
            }
            lastProgressNs = System.nanoTime();
            if (failure == null) {
                delivered++;
            } else {
                failed++;
                failures.merge(failure, 1L, Long::sum);
            }
            if (!attempted.contains(requestId) || raisedIds.contains(requestId)) {
                unknown++;
            } else if (told.merge(requestId, 1, Integer::sum) > 1) {
                duplicates++;
            } else {
                toldUnique++;
                if (untold() == 0) {
                    allToldNs = System.nanoTime(); // the last time every post so far was told
                }
            }
            return toldTotal;
        }

        @Override
        public boolean toldWhenPolled() {
            return true;
        }
    }

    /** Receives and checks tensors in one of the handler modes. */
    static final class Consumer {
        private final int count;
        private final String mode;
        private final int every;
        private final long idleNs;

        private long received;
        private long bad;
        private long duplicates;
        private long raised;
        private long errors;
        private long forged;
        private long staleViews;
        private long refusedViews;
        private long ownViews;
        private long openAccessors;
        private final List<Saved> handled = new ArrayList<>(); // stale-view: saved in this receive's handlers
        private final List<Saved> older = new ArrayList<>(); // and in the receive before it
        private boolean stop;
        private final Set<String> seen = new HashSet<>();
        private final Set<String> errorTypes = new HashSet<>();
        private ReceivedTensor kept;
        private TensorEndpoint endpoint;

        Consumer(Args a) {
            count = Integer.parseInt(a.positional(3));
            String m = a.positional(4);
            int colon = m.indexOf(':');
            mode = colon < 0 ? m : m.substring(0, colon);
            every = colon < 0 ? 0 : Integer.parseInt(m.substring(colon + 1));
            idleNs = a.option("idle", 15) * 1_000_000_000L;
        }

        int run(Deployment deployment) throws Exception {
            try {
                endpoint = TensorEndpoint.open(deployment);
            } catch (RuntimeException e) {
                System.out.println("OPEN-FAILED kind=" + (e instanceof EntityInUseException ? "ENTITY_IN_USE" : "OTHER")
                    + " type=" + e.getClass().getSimpleName() + " message=" + e.getMessage());
                return OPEN_FAILED_EXIT;
            }
            try {
                System.out.println("READY");
                if (mode.equals("stop-after")) {
                    stopAfter();
                } else {
                    loop();
                }
                if (kept != null) {
                    release(kept);
                    kept = null;
                }
            } finally {
                endpoint.close(); // a second close (after close-on-stop) does nothing
            }
            TensorEndpoint.MailboxStats mailbox = endpoint.stats().mailbox();
            System.out.println("RESULT received=" + received + " bad=" + bad + " duplicates=" + duplicates + " raised="
                + raised + " errors=" + errors + " badInput=" + (mailbox.badMessages() + mailbox.garbageRecords())
                + " skipped=" + mailbox.unblocks() + " forged=" + forged + " staleViews=" + staleViews
                + " refusedViews=" + refusedViews + " ownViews=" + ownViews + " openAccessors=" + openAccessors);
            return bad == 0 && duplicates == 0 && errors == 0 ? 0 : 1;
        }

        private void loop() {
            long lastNs = System.nanoTime();
            while (!stop && received < count && System.nanoTime() - lastNs < idleNs) {
                long before = received;
                try {
                    endpoint.receive(this::handle, Duration.ofMillis(200));
                } catch (Raised e) {
                    // the handler's own throw, counted there: receive again
                } catch (RuntimeException | AssertionError e) {
                    error(e);
                }
                if (received > before) {
                    lastNs = System.nanoTime();
                }
                if (mode.equals("stale-view")) {
                    checkSaved();
                }
            }
            checkSaved();
            checkSaved();
        }

        /**
         * Reads what the handlers of the receive before the last one saved, long after they returned (the producer
         * has had time to reuse their slots): the tensor's accessor must refuse, the saved view must refuse or still
         * show its own tensor, never another's.
         */
        private void checkSaved() {
            for (Saved saved : older) {
                try {
                    long seq = checkedSeq(saved.tensor().data());
                    openAccessors++;
                    if (seq != saved.seq()) {
                        staleViews++;
                    }
                } catch (RuntimeException e) {
                    // refused: the promise
                }
                try {
                    long seq = checkedSeq(saved.view());
                    if (seq == saved.seq()) {
                        ownViews++;
                    } else {
                        staleViews++;
                    }
                } catch (RuntimeException e) {
                    refusedViews++;
                }
            }
            older.clear();
            older.addAll(handled);
            handled.clear();
        }

        private void stopAfter() throws InterruptedException {
            long lastNs = System.nanoTime();
            while (received < every && System.nanoTime() - lastNs < idleNs) {
                long before = received;
                try {
                    if (endpoint.poll(this::handle, (int) Math.min(64, every - received)) == 0) {
                        Thread.sleep(1);
                    }
                } catch (RuntimeException e) {
                    error(e);
                }
                if (received > before) {
                    lastNs = System.nanoTime();
                }
            }
            System.out.println("PROGRESS");
            Thread.sleep(120_000); // alive and not reading, until signalled
        }

        private void handle(IncomingTensor tensor) {
            String id = tensor.requestId().toString();
            if (id.startsWith("forged")) {
                forged++; // a forged descriptor handed over as a tensor
                return;
            }
            long seq = checkedSeq(tensor.data());
            if (seq < 0 || !(id.equals("stop") || id.equals("ghost") || id.equals(Long.toString(seq)))) {
                bad++;
            }
            if (!seen.add(id)) {
                duplicates++;
            }
            if (++received == PROGRESS_AT) {
                System.out.println("PROGRESS");
            }
            if (id.equals("stop")) {
                stop = true;
            }
            switch (mode) {
                case "plain", "stop-after" -> { } // stop-after stops reading in stopAfter()
                case "raise" -> raiseEvery();
                case "keep" -> keep(tensor);
                case "keep-raise" -> {
                    keep(tensor);
                    raiseEvery();
                }
                case "slow" -> LockSupport.parkNanos(every * 1_000_000L);
                case "stale-view" -> handled.add(new Saved(tensor, tensor.data(), seq));
                case "close-on-stop" -> {
                    if (stop) {
                        endpoint.close();
                    }
                }
                default -> throw new IllegalArgumentException("mode: " + mode);
            }
        }

        private void raiseEvery() {
            if (received % every == 0) {
                raised++;
                throw new Raised(received);
            }
        }

        private void keep(IncomingTensor tensor) {
            ReceivedTensor previous = kept;
            kept = tensor.keep();
            if (previous != null) {
                release(previous);
            }
        }

        /** Checks a kept tensor's bytes once more (its slot must still be its own), then lets it go. */
        private void release(ReceivedTensor tensor) {
            String id = tensor.descriptor().requestId();
            long seq = checkedSeq(tensor.data());
            if (seq < 0 || !(id.equals("stop") || id.equals(Long.toString(seq)))) {
                bad++;
            }
            tensor.close();
        }

        private void error(Throwable e) {
            errors++;
            if (errorTypes.add(e.getClass().getSimpleName())) {
                System.out.println("RECEIVE-ERROR " + e);
            }
        }
    }

    /** A received tensor and its bytes, kept past the handler without {@code keep()}. */
    private record Saved(IncomingTensor tensor, MemorySegment view, long seq) {
    }

    /** What a {@code raise:N} listener throws: an application's bug in outcome handling. */
    private static final class ListenerRaised extends RuntimeException {
        ListenerRaised(long nth) {
            super("conformance: the listener raises on outcome " + nth);
        }
    }

    /** What a raise:N handler throws: an AssertionError, as a failed check in a handler would. */
    private static final class Raised extends AssertionError {
        Raised(long received) {
            super("conformance: the handler raises on tensor " + received);
        }
    }
}
