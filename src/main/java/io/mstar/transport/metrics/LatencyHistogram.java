package io.mstar.transport.metrics;

import io.mstar.transport.LatencyStats;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * A latency histogram in nanoseconds with fixed log-linear buckets: values below 256 ns are counted
 * exactly, larger ones in buckets 1/128 of their power of two wide (under 0.8% of the value, as fine as
 * HdrHistogram with two significant digits), up to 2^44 ns (about 4.9 hours; larger values count there).
 * Recording is one atomic add and allocates nothing; 4,864 buckets, 38 KiB. Thread-safe; a snapshot taken
 * while others record is off by at most the values recorded meanwhile.
 */
public final class LatencyHistogram {
    private static final int SUB_BITS = 8;
    private static final int SUB = 1 << SUB_BITS;
    private static final int HALF = SUB / 2;
    private static final int MAX_EXPONENT = 43;
    static final int BUCKETS = SUB + (MAX_EXPONENT - SUB_BITS + 1) * HALF;
    static final long MAX_VALUE = (1L << (MAX_EXPONENT + 1)) - 1;

    private final AtomicLongArray counts = new AtomicLongArray(BUCKETS);
    private final AtomicLong max = new AtomicLong();
    private final AtomicLong total = new AtomicLong();

    /** Counts one latency; negative values count as zero. */
    public void record(long ns) {
        long value = Math.clamp(ns, 0, MAX_VALUE);
        counts.incrementAndGet(bucket(value));
        total.addAndGet(value);
        long seen = max.get();
        while (value > seen && !max.compareAndSet(seen, value)) {
            seen = max.get();
        }
    }

    static int bucket(long value) {
        if (value < SUB) {
            return (int) value;
        }
        int exponent = 63 - Long.numberOfLeadingZeros(value); // >= SUB_BITS
        int top = (int) (value >>> (exponent - SUB_BITS + 1)); // in [HALF, SUB)
        return SUB + (exponent - SUB_BITS) * HALF + top - HALF;
    }

    /** The largest value that falls into {@code bucket}. */
    static long highestValue(int bucket) {
        if (bucket < SUB) {
            return bucket;
        }
        int exponent = SUB_BITS + (bucket - SUB) / HALF;
        long top = HALF + (bucket - SUB) % HALF;
        int shift = exponent - SUB_BITS + 1;
        return ((top + 1) << shift) - 1;
    }

    public LatencyStats snapshot() {
        long[] snapshot = new long[BUCKETS];
        long count = 0;
        for (int i = 0; i < BUCKETS; i++) {
            snapshot[i] = counts.get(i);
            count += snapshot[i];
        }
        long maxNs = max.get();
        return new LatencyStats(count, percentile(snapshot, count, 0.50, maxNs), percentile(snapshot, count, 0.99, maxNs),
            percentile(snapshot, count, 0.999, maxNs), maxNs, total.get());
    }

    // The highest value of the bucket that holds the ceil(q * count)-th value, never above the max seen.
    private static long percentile(long[] snapshot, long count, double q, long maxNs) {
        if (count == 0) {
            return 0;
        }
        long rank = Math.max(1, (long) Math.ceil(q * count));
        long seen = 0;
        for (int i = 0; i < snapshot.length; i++) {
            seen += snapshot[i];
            if (seen >= rank) {
                return Math.min(highestValue(i), maxNs);
            }
        }
        return maxNs;
    }
}
