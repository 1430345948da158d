package io.mstar.transport.metrics;

import io.mstar.transport.LatencyStats;
import com.sun.management.ThreadMXBean;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The fixed-bucket histogram against HdrHistogram, on latencies from 100 ns to 10 s. */
class LatencyHistogramTest {
    @Test
    void everyValueLiesInABucketNoWiderThanOnePart() {
        for (long v = 0; v < 1 << 20; v++) {
            checkBucket(v);
        }
        SplittableRandom random = new SplittableRandom(1);
        for (int i = 0; i < 1_000_000; i++) {
            checkBucket(random.nextLong(LatencyHistogram.MAX_VALUE));
        }
        assertEquals(LatencyHistogram.BUCKETS - 1, LatencyHistogram.bucket(LatencyHistogram.MAX_VALUE));
    }

    private static void checkBucket(long v) {
        int b = LatencyHistogram.bucket(v);
        long high = LatencyHistogram.highestValue(b);
        long low = b == 0 ? 0 : LatencyHistogram.highestValue(b - 1) + 1;
        assertTrue(low <= v && v <= high, v + " not in bucket " + b + " [" + low + ", " + high + "]");
        assertTrue(high - v <= Math.max(0, v / 128), v + ": bucket too wide, up to " + high);
    }

    @Test
    void percentilesAgreeWithHdrHistogramWithinItsPrecision() {
        long seed = System.nanoTime();
        SplittableRandom random = new SplittableRandom(seed);
        for (int round = 0; round < 20; round++) {
            LatencyHistogram ours = new LatencyHistogram();
            Histogram reference = new Histogram(3); // three significant digits: the finer one
            double mu = 7 + random.nextDouble() * 12; // medians from 1 us to 0.2 s
            double sigma = 0.2 + random.nextDouble() * 2;
            for (int i = 0; i < 100_000; i++) {
                long v = Math.clamp((long) Math.exp(mu + sigma * random.nextGaussian()), 100, 10_000_000_000L);
                ours.record(v);
                reference.recordValue(v);
            }
            LatencyStats stats = ours.snapshot();
            String where = "seed=" + seed + " round=" + round;
            assertEquals(reference.getTotalCount(), stats.count(), where);
            assertEquals(reference.getMaxValue(), stats.maxNs(), 0.001 * stats.maxNs(), where);
            assertClose(reference.getValueAtPercentile(50), stats.p50Ns(), where + " p50");
            assertClose(reference.getValueAtPercentile(99), stats.p99Ns(), where + " p99");
            assertClose(reference.getValueAtPercentile(99.9), stats.p999Ns(), where + " p99.9");
        }
    }

    // Both report a bucket's highest value: ours is up to 1/128 above the true value, HdrHistogram's 1/1000.
    private static void assertClose(long expected, long actual, String where) {
        assertEquals(expected, actual, expected / 100.0, where + ": HdrHistogram " + expected + ", ours " + actual);
    }

    @Test
    void recordingAllocatesNothing() {
        LatencyHistogram histogram = new LatencyHistogram();
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        for (int i = 0; i < 100_000; i++) {
            histogram.record(i * 37L); // warm: compiled
        }
        long allocated = Long.MAX_VALUE; // the least of five windows: the JIT may compile late on a busy machine
        for (int window = 0; window < 5; window++) {
            long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < 100_000; i++) {
                histogram.record(i * 1009L);
            }
            allocated = Math.min(allocated, threads.getCurrentThreadAllocatedBytes() - before);
        }
        assertTrue(allocated < 1024, "recording 100,000 values allocated " + allocated + " bytes");
    }
}
