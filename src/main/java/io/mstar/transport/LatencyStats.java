package io.mstar.transport;

import java.util.Locale;

/**
 * A latency distribution since start, from a histogram whose buckets are under 0.8% wide relative to their
 * values: percentiles are the bucket's highest value, the max is exact. All zero when nothing was recorded.
 *
 * @param count how many latencies were recorded
 * @param p50Ns the median
 * @param p99Ns the 99th percentile
 * @param p999Ns the 99.9th percentile
 * @param maxNs the largest
 * @param totalNs their sum
 */
public record LatencyStats(long count, long p50Ns, long p99Ns, long p999Ns, long maxNs, long totalNs) {
    /** {@code <name>P50Us=... <name>P99Us=... <name>P999Us=... <name>MaxUs=...}, for log lines. */
    public String toLogFields(String name) {
        return name + "P50Us=" + micros(p50Ns) + " " + name + "P99Us=" + micros(p99Ns) + " " + name + "P999Us="
            + micros(p999Ns) + " " + name + "MaxUs=" + micros(maxNs);
    }

    private static String micros(long ns) {
        return ns < 10_000 ? String.format(Locale.ROOT, "%.1f", ns / 1000.0) : Long.toString(ns / 1000);
    }
}
