package io.mstar.transport;

import java.util.Locale;

/**
 * An immutable snapshot of one arena, taken atomically (all fields agree with each other).
 *
 * @param segments              mapped segments, dedicated ones included
 * @param capacityBytes         bytes of all segments
 * @param usedBytes             bytes in live slots (each rounded up to the 256-byte alignment)
 * @param freeBytes             {@code capacityBytes - usedBytes}
 * @param largestFreeBlockBytes the largest slot a reserve could get without growing
 * @param fragmentation         the share of free bytes outside their segment's largest free block
 *                              ({@code 1 - sum of each segment's largest free block / freeBytes}): 0 for an empty
 *                              arena of any number of segments, and when nothing is free
 * @param liveSlots             slots reserved and not yet freed
 * @param reserves              successful reserves since start
 * @param frees                 successful frees since start
 * @param failedReserves        reserves that found no space (the "full" outcome) or had an invalid size
 * @param refusedFrees          frees refused as a double free, an unknown offset or a stale handle
 */
public record ArenaStats(
    int segments,
    long capacityBytes,
    long usedBytes,
    long freeBytes,
    long largestFreeBlockBytes,
    double fragmentation,
    long liveSlots,
    long reserves,
    long frees,
    long failedReserves,
    long refusedFrees) {

    /** One {@code key=value} line for logs. */
    public String toLogLine() {
        return "segments=" + segments + " capacityBytes=" + capacityBytes + " usedBytes=" + usedBytes
            + " freeBytes=" + freeBytes + " largestFreeBlockBytes=" + largestFreeBlockBytes
            + " fragmentation=" + String.format(Locale.ROOT, "%.3f", fragmentation)
            + " liveSlots=" + liveSlots + " reserves=" + reserves + " frees=" + frees
            + " failedReserves=" + failedReserves + " refusedFrees=" + refusedFrees;
    }
}
