package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.ParentWatch;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The JVM side of the cross-language runs, the mirror of {@code python -m mstar_transport.worker}: {@code produce
 * ENDPOINT ENTITY TO[,TO2] COUNT SEED} posts COUNT tensors of the worker's seeded sizes (claim, fill, post; a
 * fan-out when two consumers are named) and waits for every outcome; {@code consume ENDPOINT ENTITY COUNT}
 * receives COUNT and checks every word. Word k of tensor seq holds seq * 0x9E3779B97F4A7C15 + k. Each prints one
 * RESULT line. The directory and knobs come from the environment. For the benchmark, {@code blast ENDPOINT ENTITY
 * TO SIZE SECONDS} posts tensors of SIZE bytes (claim, write the sequence number, post; 64 in flight) for SECONDS
 * and prints its rate, and {@code drain ENDPOINT ENTITY [one]} sums every word (with {@code one}, only the first)
 * of each tensor it receives in place until a tensor with request id "end".
 */
public final class PythonPeer {
    static final long GOLDEN = 0x9E3779B97F4A7C15L;
    private static final long[] SIZES = {4096, 65536, 1 << 20, 16 << 20};
    private static final int[] WEIGHTS = {9700, 290, 9, 1};
    static final int PROGRESS_AT = 1000;

    private PythonPeer() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        TransportConfig config = TransportConfig.from(System.getenv()::get);
        int rc = switch (args[0]) {
            case "produce" -> produce(Deployment.of(config, args[1], args[2]), List.of(args[3].split(",")),
                Integer.parseInt(args[4]), Long.parseLong(args[5]));
            case "consume" -> consume(Deployment.of(config, args[1], args[2]), Integer.parseInt(args[3]));
            case "blast" -> blast(Deployment.of(config, args[1], args[2]), args[3], Long.parseLong(args[4]),
                Double.parseDouble(args[5]));
            case "drain" -> drain(Deployment.of(config, args[1], args[2]), args.length > 3 && args[3].equals("one"));
            default -> 2;
        };
        System.exit(rc);
    }

    /** The size of the next tensor: the worker's sizes and weights (its own generator). */
    static long nextSize(Random rng) {
        int total = 0;
        for (int w : WEIGHTS) {
            total += w;
        }
        int pick = rng.nextInt(total);
        for (int i = 0; i < SIZES.length; i++) {
            pick -= WEIGHTS[i];
            if (pick < 0) {
                return SIZES[i];
            }
        }
        throw new AssertionError();
    }

    static void fill(MemorySegment data, long seq) {
        long base = seq * GOLDEN;
        for (long k = 0; k < data.byteSize() / 8; k++) {
            data.setAtIndex(ValueLayout.JAVA_LONG, k, base + k);
        }
    }

    static boolean intact(MemorySegment data, long seq) {
        long base = seq * GOLDEN;
        for (long k = 0; k < data.byteSize() / 8; k++) {
            if (data.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, k) != base + k) {
                return false;
            }
        }
        return data.byteSize() % 8 == 0;
    }

    private static int produce(Deployment deployment, List<String> to, int count, long seed) throws Exception {
        Outcomes listener = new Outcomes();
        AtomicLong delivered = listener.delivered;
        Map<String, Integer> failures = listener.failures;
        Random rng = new Random(seed);
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, listener)) {
            for (String consumer : to) {
                if (!endpoint.awaitPeer(consumer, Duration.ofSeconds(60))) {
                    System.out.println("RESULT no consumer " + consumer);
                    return 1;
                }
            }
            System.out.println("READY");
            int window = 64;
            for (int seq = 0; seq < count; seq++) {
                while (seq - delivered.get() - failed(failures) >= window) {
                    endpoint.awaitOutcomes(64, Duration.ofMillis(100));
                }
                long nbytes = nextSize(rng);
                if (to.size() == 1) {
                    try (TensorClaim claim = endpoint.claim(Integer.toString(seq), DType.U8, nbytes)) {
                        fill(claim.memory(), seq);
                        endpoint.post(to.getFirst(), claim);
                    }
                } else {
                    MemorySegment data = MemorySegment.ofArray(new long[(int) (nbytes / 8)]);
                    fill(data, seq);
                    endpoint.send(to, Integer.toString(seq), io.mstar.transport.Tensor.of(DType.U8, data, nbytes));
                }
            }
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (delivered.get() + failed(failures) < count && System.nanoTime() < deadline) {
                endpoint.awaitOutcomes(64, Duration.ofMillis(100));
            }
        }
        System.out.println("RESULT delivered=" + delivered.get() + " failed=" + failed(failures) + " failures="
            + failures);
        return delivered.get() == count ? 0 : 1;
    }

    // Outcomes told when polled (on the producer's thread), counted.
    private static final class Outcomes implements DeliveryListener {
        final AtomicLong delivered = new AtomicLong();
        final Map<String, Integer> failures = new TreeMap<>();

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            delivered.incrementAndGet();
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            synchronized (failures) {
                failures.merge(failure.name(), 1, Integer::sum);
            }
        }

        @Override
        public boolean toldWhenPolled() {
            return true;
        }

        long told() {
            return delivered.get() + PythonPeer.failed(failures);
        }
    }

    private static long failed(Map<String, Integer> failures) {
        synchronized (failures) {
            return failures.values().stream().mapToLong(Integer::longValue).sum();
        }
    }

    private static int blast(Deployment deployment, String to, long size, double seconds) throws Exception {
        Outcomes listener = new Outcomes();
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, listener)) {
            if (!endpoint.awaitPeer(to, Duration.ofSeconds(60))) {
                return 1;
            }
            endpoint.prepareToSend();
            System.out.println("READY");
            long sent = 0;
            long start = System.nanoTime();
            long end = start + (long) (seconds * 1e9);
            while (System.nanoTime() < end) {
                while (sent - listener.told() >= 64) {
                    endpoint.awaitOutcomes(64, Duration.ofMillis(100));
                }
                try (TensorClaim claim = endpoint.claim("t", DType.U8, size)) {
                    claim.memory().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, sent);
                    endpoint.post(to, claim);
                }
                sent++;
            }
            while (listener.told() < sent) {
                endpoint.awaitOutcomes(64, Duration.ofMillis(100));
            }
            double elapsed = (System.nanoTime() - start) / 1e9;
            try (TensorClaim claim = endpoint.claim("end", DType.U8, 8)) {
                endpoint.post(to, claim);
            }
            endpoint.awaitOutcomes(1, Duration.ofSeconds(10));
            System.out.printf("RESULT tensors=%d seconds=%.3f perSecond=%.0f gbps=%.3f%n", sent, elapsed,
                sent / elapsed, sent * size / elapsed / 1e9);
        }
        return 0;
    }

    private static int drain(Deployment deployment, boolean firstWordOnly) throws Exception {
        long[] sum = {0, 0}; // of every word, tensors
        boolean[] done = {false};
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            System.out.println("READY");
            while (!done[0]) {
                endpoint.receive(tensor -> {
                    if (tensor.requestIdIs("end")) {
                        done[0] = true;
                        return;
                    }
                    MemorySegment data = tensor.memory();
                    long at = tensor.offset();
                    long s = 0;
                    long words = firstWordOnly ? Math.min(1, tensor.nbytes() / 8) : tensor.nbytes() / 8;
                    for (long k = 0; k < words; k++) {
                        s += data.get(ValueLayout.JAVA_LONG_UNALIGNED, at + 8 * k);
                    }
                    sum[0] += s;
                    sum[1]++;
                }, Duration.ofMillis(500));
            }
        }
        System.out.println("RESULT tensors=" + sum[1] + " sum=" + sum[0]);
        return 0;
    }

    private static int consume(Deployment deployment, int count) throws Exception {
        long[] seen = {0, 0}; // received, bad
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            System.out.println("READY");
            long deadline = System.nanoTime() + 600_000_000_000L;
            while (seen[0] < count && System.nanoTime() < deadline) {
                endpoint.receive(tensor -> {
                    long seq = Long.parseLong(tensor.requestId().toString());
                    if (!intact(tensor.memory().asSlice(tensor.offset(), tensor.nbytes()), seq)) {
                        seen[1]++;
                    }
                    if (++seen[0] == PROGRESS_AT) {
                        System.out.println("PROGRESS"); // a test that kills this consumer mid-stream waits for it
                    }
                }, Duration.ofMillis(500));
            }
        }
        System.out.println("RESULT received=" + seen[0] + " bad=" + seen[1]);
        return seen[0] == count && seen[1] == 0 ? 0 : 1;
    }
}
