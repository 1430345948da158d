package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.IncomingTensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TransportConfig;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * One worker of the scale benchmark ({@link ScaleBench}), through the exported API as a user's worker calls it.
 * A producer claims, fills and posts to its consumers in turn, at most {@link Protocol#window} in flight (a
 * semaphore its listener releases, which also records each payload's send-to-outcome time); every payload starts
 * with its producer and sequence number and every other byte is one value derived from them. A consumer checks
 * every byte in place (CRC32C against the CRC of that value's fill) and counts what was wrong. Each waits for the
 * launcher's {@code go} file, so that all producers measure the same seconds.
 */
final class ScalePeer {
    private ScalePeer() {
    }

    static Deployment deployment(String dir, String entity) {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, dir, TransportConfig.ARENA, "1",
            TransportConfig.MAX_SEGMENTS, "4", TransportConfig.SEGMENT_MB, "64");
        return Deployment.of(TransportConfig.from(env::get), "mstar-scale", entity);
    }

    static byte valueOf(long producer, long seq) {
        return (byte) ((producer * 0x9E3779B97F4A7C15L + seq * 0xBF58476D1CE4E5B9L) >>> 56);
    }

    /** {@code consumer ENTITY DIR SIZE}: receives until its input ends; prints {@code RESULT received=N bad=M}. */
    static void consumer(String entity, String dir, long size) throws Exception {
        long[] crcOfValue = new long[256];
        CRC32C crc = new CRC32C();
        byte[] fill = new byte[(int) size - 8];
        for (int v = 0; v < 256; v++) {
            Arrays.fill(fill, (byte) v);
            crc.reset();
            crc.update(fill);
            crcOfValue[v] = crc.getValue();
        }
        AtomicLong received = new AtomicLong();
        AtomicLong bad = new AtomicLong();
        Map<MemorySegment, ByteBuffer> views = new IdentityHashMap<>();
        TensorHandler check = (IncomingTensor t) -> {
            long head = t.memory().get(ValueLayout.JAVA_LONG_UNALIGNED, t.offset());
            ByteBuffer view = views.computeIfAbsent(t.memory(), MemorySegment::asByteBuffer);
            int from = (int) t.offset() + 8;
            view.limit((int) (t.offset() + t.nbytes())).position(from);
            crc.reset();
            crc.update(view);
            if (crc.getValue() != crcOfValue[valueOf(head >>> 40, head & 0xFF_FFFF_FFFFL) & 0xFF]) {
                bad.incrementAndGet();
            }
            received.incrementAndGet();
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment(dir, entity))) {
            System.out.println("READY");
            Thread stop = Thread.ofPlatform().daemon().start(() -> {
                try {
                    System.in.read(); // the launcher closes our input when the cell ends
                } catch (Exception ignored) {
                    // ends the same way
                }
            });
            while (stop.isAlive()) {
                endpoint.receive(check, Duration.ofMillis(100));
            }
        }
        System.out.println("RESULT received=" + received.get() + " bad=" + bad.get());
    }

    /**
     * {@code producer ENTITY DIR SIZE SECONDS CONSUMER,...}: posts for SECONDS once the go file appears; prints
     * {@code RESULT payloads=N seconds=S p50us=.. p99us=..}.
     */
    static void producer(String entity, String dir, long size, double seconds, List<String> consumers, long id)
        throws Exception {
        int window = Protocol.window(size);
        Semaphore places = new Semaphore(window);
        long[] sentAt = new long[1 << 16];
        long[] samples = new long[1 << 22];
        int[] sampleCount = {0};
        Map<String, Integer> slotOf = new HashMap<>();
        String[] ids = new String[sentAt.length];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = "s" + i;
            slotOf.put(ids[i], i);
        }
        boolean[] measuring = {false};
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                long took = System.nanoTime() - sentAt[slotOf.get(requestId)];
                synchronized (samples) {
                    if (measuring[0] && sampleCount[0] < samples.length) {
                        samples[sampleCount[0]++] = took;
                    }
                }
                places.release();
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.err.println("not delivered: " + requestId + " " + failure + " " + detail);
                System.exit(3);
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment(dir, entity), listener)) {
            for (String c : consumers) {
                if (!endpoint.awaitPeer(c, Duration.ofSeconds(60))) {
                    throw new IllegalStateException("consumer did not start: " + c);
                }
            }
            endpoint.prepareToSend();
            System.out.println("READY");
            Path go = Path.of(dir, "go");
            while (!Files.exists(go)) {
                Thread.sleep(1);
            }
            long[] shape = {size};
            long warmEnd = System.nanoTime() + (long) (Protocol.warmUpSeconds(seconds) * 1e9);
            long start = 0;
            long end = Long.MAX_VALUE;
            long measuredFrom = 0;
            long seq = 0;
            while (true) {
                long now = System.nanoTime();
                if (start == 0 && now >= warmEnd) {
                    start = now;
                    end = now + (long) (seconds * 1e9);
                    measuredFrom = seq;
                    synchronized (samples) {
                        measuring[0] = true;
                    }
                } else if (now >= end) {
                    break;
                }
                places.acquire();
                int slot = (int) (seq % (2L * window));
                try (TensorClaim claim = endpoint.claim(ids[slot], DType.U8, shape)) {
                    MemorySegment bytes = claim.memory();
                    bytes.asSlice(8).fill(valueOf(id, seq));
                    bytes.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, (id << 40) | seq);
                    sentAt[slot] = System.nanoTime();
                    endpoint.post(consumers.get((int) (seq % consumers.size())), claim);
                }
                seq++;
            }
            double elapsed = (System.nanoTime() - start) / 1e9;
            long payloads = seq - measuredFrom;
            places.acquire(window); // every outcome, before the endpoint closes
            long[] sorted;
            synchronized (samples) {
                measuring[0] = false;
                sorted = Arrays.copyOf(samples, sampleCount[0]);
            }
            Arrays.sort(sorted);
            System.out.printf(Locale.ROOT, "RESULT payloads=%d seconds=%.3f p50us=%.1f p99us=%.1f%n", payloads, elapsed,
                pct(sorted, 0.50) / 1e3, pct(sorted, 0.99) / 1e3);
        }
    }

    private static double pct(long[] sorted, double p) {
        return sorted.length == 0 ? Double.NaN : sorted[(int) Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    }
}
