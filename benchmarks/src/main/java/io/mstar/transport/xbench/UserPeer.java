package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.IncomingTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.zip.CRC32C;

/**
 * The library as a user's benchmark calls it: only the exported API, the way the user guide shows it. The
 * producer opens its endpoint with a {@link DeliveryListener} (told on the thread that learns each outcome),
 * gives every payload a request id of its own, and either fills its own buffer and {@code post}s it
 * ({@code user-post}) or claims room, fills it in place and posts the claim ({@code user-claim}; across two
 * "nodes" over the cross-node path: {@code user-post-remote} and {@code user-remote}); at most {@link Protocol#window} payloads in flight,
 * each outcome frees a window place (a semaphore) and records the payload's send-to-outcome time, matched by
 * its request id. The consumer calls {@code receive} with a handler that checks a CRC32C over every byte in
 * place and returns (the endpoint ACKs). Nothing here reaches into the library's internals or idles on its
 * behalf.
 *
 * <p>Each side prints its {@link Cost} per payload (the producer over its measured seconds, the consumer from a
 * second after each size's first payload).
 */
final class UserPeer {
    private static final int MAX_SAMPLES = 1 << 22;
    private static final Duration RECEIVE_TIMEOUT = Duration.ofSeconds(1);
    private static final Duration OUTCOME_WAIT = Duration.ofSeconds(1);

    private UserPeer() {
    }

    static void consumer(String peer, String dir) throws Exception {
        Checker checker = new Checker();
        try (TensorEndpoint endpoint = TensorEndpoint.open(ArenaPeer.deployment(transportOf(peer), dir, "consumer"))) {
            System.out.println("READY");
            while (!checker.done) {
                endpoint.receive(checker, RECEIVE_TIMEOUT);
            }
        }
        System.out.println(checker.verifier.summary());
    }

    /** The consumer's handler: CRC32C over the tensor's bytes where they lie, against the fill it expects next. */
    private static final class Checker implements TensorHandler {
        final Protocol.Verifier verifier = new Protocol.Verifier();
        final CRC32C crc = new CRC32C();
        final Map<MemorySegment, ByteBuffer> views = new IdentityHashMap<>(); // one ByteBuffer per mapping
        boolean done;

        @Override
        public void onTensor(IncomingTensor tensor) {
            long nbytes = tensor.nbytes();
            if (nbytes == 0) {
                done = true;
                return;
            }
            ByteBuffer view = views.computeIfAbsent(tensor.memory(), MemorySegment::asByteBuffer);
            int from = (int) tensor.offset();
            view.limit(from + (int) nbytes).position(from);
            crc.reset();
            crc.update(view);
            verifier.checkCrc(nbytes, crc.getValue());
        }
    }

    static void producer(String peer, String dir, double seconds) throws Exception {
        boolean claim = !peer.startsWith("user-post");
        boolean polled = peer.endsWith("-polled");
        Window window = new Window();
        DeliveryListener outcomes = new DeliveryListener() { // on the thread that learns it, or polls for it
            @Override
            public boolean toldWhenPolled() {
                return polled;
            }

            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                window.done(requestId);
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.err.println("not delivered: " + requestId + " " + failure + ", " + detail);
                System.exit(3);
            }
        };
        try (Arena scratch = Arena.ofShared();
             TensorEndpoint endpoint = TensorEndpoint.open(ArenaPeer.deployment(transportOf(peer), dir, "producer"),
                 outcomes)) {
            if (!endpoint.awaitPeer("consumer", Duration.ofSeconds(30))) {
                throw new IllegalStateException("the consumer did not start");
            }
            endpoint.prepareToSend();
            if (polled) {
                window.pollOn(endpoint);
            }
            MemorySegment source = scratch.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
            for (long size : Protocol.SIZES) {
                Tensor own = Tensor.of(DType.U8, source.asSlice(0, size), size);
                long[] shape = {size}; // one array for every claim: the claim copies it
                window.start(Protocol.window(size));
                long seq = 0;
                long warmUntil = System.nanoTime() + (long) (Protocol.warmUpSeconds(seconds) * 1e9);
                long start = 0;
                long end = Long.MAX_VALUE;
                long measuredFrom = -1;
                long[] costFrom = null;
                Curve curve = null;
                while (true) {
                    long now = System.nanoTime();
                    if (measuredFrom < 0 && now >= warmUntil) {
                        measuredFrom = seq;
                        start = now;
                        end = now + (long) (seconds * 1e9);
                        costFrom = Cost.snapshot();
                        window.measure(true);
                        curve = new Curve(start, seconds);
                    } else if (now >= end) {
                        break;
                    }
                    if (curve != null) {
                        curve.at(now, seq - measuredFrom);
                    }
                    String requestId = window.take(seq);
                    if (claim) {
                        try (TensorClaim room = endpoint.claim(requestId, DType.U8, shape)) {
                            Protocol.fill(room.memory(), seq);
                            endpoint.post("consumer", room);
                        }
                    } else {
                        Protocol.fill(own.data(), seq);
                        endpoint.post("consumer", requestId, own);
                    }
                    if (polled) {
                        endpoint.pollOutcomes(64);
                    }
                    seq++;
                }
                long elapsed = System.nanoTime() - start;
                long payloads = seq - measuredFrom;
                String cost = Cost.line("producer", size, costFrom, payloads);
                window.measure(false);
                window.drain();
                long[] sorted = window.samples();
                System.out.printf(Locale.ROOT, "ROW %d %.1f %.4f %.2f %.2f %.2f%n", size, payloads / (elapsed / 1e9),
                    payloads * size / (elapsed / 1e9) / 1e9, percentile(sorted, 0.50) / 1e3,
                    percentile(sorted, 0.99) / 1e3, percentile(sorted, 0.999) / 1e3);
                System.out.println(cost);
                if (curve.line(size) != null) {
                    System.out.println(curve.line(size));
                }
            }
            System.out.println(Cost.jitLine("producer"));
            window.take(0); // the end marker holds a place until its outcome
            endpoint.post("consumer", "end", Tensor.of(DType.U8, MemorySegment.NULL, 0));
            window.drain();
        }
    }

    private static String transportOf(String peer) {
        return peer.endsWith("remote") ? "remote" : "arena-claim";
    }

    /**
     * The producer's window: a semaphore of places, a request id per place, and the send time of what holds
     * it; an outcome frees its place, found by its request id.
     */
    private static final class Window {
        private final String[] ids = new String[128];
        private final Map<String, Integer> placeOf = new HashMap<>();
        private final long[] sentAt = new long[ids.length];
        private final long[] samples = new long[MAX_SAMPLES];
        private volatile boolean measuring;
        private int sampleCount; // guarded by this
        private Semaphore places;
        private int size;
        private TensorEndpoint polled; // non-null: outcomes are polled on the producer's thread

        Window() {
            for (int i = 0; i < ids.length; i++) {
                ids[i] = "request-" + i;
                placeOf.put(ids[i], i);
            }
        }

        void start(int places) {
            this.size = places;
            this.places = new Semaphore(places);
            synchronized (this) {
                sampleCount = 0;
            }
        }

        void pollOn(TensorEndpoint endpoint) {
            this.polled = endpoint;
        }

        void measure(boolean on) {
            measuring = on;
        }

        // Waits for a free place; payload seq takes place seq mod 2 x window (never one still in flight).
        String take(long seq) throws InterruptedException {
            if (polled == null) {
                places.acquire();
            } else {
                while (!places.tryAcquire()) {
                    polled.awaitOutcomes(64, OUTCOME_WAIT);
                }
            }
            int place = (int) (seq % (2L * size));
            sentAt[place] = System.nanoTime();
            return ids[place];
        }

        void done(String requestId) {
            Integer place = placeOf.get(requestId);
            if (place != null) {
                long took = System.nanoTime() - sentAt[place];
                if (measuring) {
                    synchronized (this) {
                        if (sampleCount < MAX_SAMPLES) {
                            samples[sampleCount++] = took;
                        }
                    }
                }
            }
            places.release();
        }

        void drain() throws InterruptedException {
            while (polled != null && !places.tryAcquire(size)) {
                polled.awaitOutcomes(64, OUTCOME_WAIT);
            }
            if (polled == null) {
                places.acquire(size);
            }
            places.release(size);
        }

        synchronized long[] samples() {
            long[] sorted = Arrays.copyOf(samples, sampleCount);
            Arrays.sort(sorted);
            return sorted;
        }
    }

    private static double percentile(long[] sorted, double p) {
        return sorted.length == 0 ? Double.NaN : sorted[(int) Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    }
}
