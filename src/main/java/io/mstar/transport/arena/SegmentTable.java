package io.mstar.transport.arena;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.shm.MappedSegment;

/**
 * An arena's segments by position: each mapped segment, its {@link FirstFitAllocator}, whether it is dedicated
 * (one large tensor's) or retired (shrunk under us), and its generation, which every slot handle carries so a
 * handle of a segment since removed is told apart ({@link SlotHandle}). Also the count and bytes of all of them.
 * Not thread-safe: the {@link SegmentedArena}'s lock guards it.
 */
final class SegmentTable {
    private final MappedSegment[] segments;
    private final FirstFitAllocator[] allocators;
    private final boolean[] dedicated;
    private final boolean[] retired; // shrunk under us by another process: no new slots, removed once empty
    private final int[] generations;
    private int positionsInUse; // positions below this may hold a segment
    private int count;
    private long bytes; // every segment's size, dedicated ones included

    SegmentTable(int maxSegments) {
        segments = new MappedSegment[maxSegments];
        allocators = new FirstFitAllocator[maxSegments];
        dedicated = new boolean[maxSegments];
        retired = new boolean[maxSegments];
        generations = new int[maxSegments];
    }

    /** Positions below this may hold a segment. */
    int positions() {
        return positionsInUse;
    }

    /** Puts {@code segment} at the first free position, with a new allocator and generation; returns the position. */
    int add(MappedSegment segment, boolean dedicatedSegment) {
        int p = 0;
        while (segments[p] != null) {
            p++;
        }
        segments[p] = segment;
        allocators[p] = new FirstFitAllocator(segment.sizeBytes());
        dedicated[p] = dedicatedSegment;
        generations[p] = SlotHandle.nextGeneration(generations[p]);
        positionsInUse = Math.max(positionsInUse, p + 1);
        count++;
        bytes += segment.sizeBytes();
        return p;
    }

    /** Takes the segment at {@code p} out of the table and returns it, still mapped. */
    MappedSegment remove(int p) {
        MappedSegment segment = segments[p];
        segments[p] = null;
        allocators[p] = null;
        dedicated[p] = false;
        retired[p] = false;
        count--;
        bytes -= segment.sizeBytes();
        return segment;
    }

    /** The position of the live segment a slot handle names, or -1 (a stale generation, a removed segment). */
    int livePosition(long slot) {
        if (slot < 0) {
            return -1;
        }
        int p = SlotHandle.position(slot);
        if (p >= positionsInUse || segments[p] == null || generations[p] != SlotHandle.generation(slot)) {
            return -1;
        }
        return p;
    }

    /** A slot handle for {@code offset} in the segment at {@code p}. */
    long handle(int p, long offset) {
        return SlotHandle.of(generations[p], p, offset);
    }

    MappedSegment segment(int p) {
        return segments[p];
    }

    /** The segment's allocator, or null where there is no segment. */
    FirstFitAllocator allocator(int p) {
        return allocators[p];
    }

    boolean isDedicated(int p) {
        return dedicated[p];
    }

    boolean isRetired(int p) {
        return retired[p];
    }

    void retire(int p) {
        retired[p] = true;
    }

    /** A regular segment that takes new slots. */
    boolean isRegular(int p) {
        return allocators[p] != null && !dedicated[p] && !retired[p];
    }

    boolean isIdleDedicated(int p) {
        return segments[p] != null && dedicated[p] && !retired[p] && allocators[p].liveSlots() == 0;
    }

    int count() {
        return count;
    }

    long bytes() {
        return bytes;
    }

    /** Sizes summed over the segments, with the arena's counters. */
    ArenaStats stats(long reserves, long frees, long failedReserves, long refusedFrees) {
        long capacity = 0;
        long used = 0;
        long largest = 0;
        long largestPerSegment = 0; // a block cannot span segments: each segment's largest counts whole
        long live = 0;
        for (int p = 0; p < positionsInUse; p++) {
            FirstFitAllocator allocator = allocators[p];
            if (allocator != null) {
                capacity += allocator.capacityBytes();
                used += allocator.usedBytes();
                largest = Math.max(largest, allocator.largestFreeBlockBytes());
                largestPerSegment += allocator.largestFreeBlockBytes();
                live += allocator.liveSlots();
            }
        }
        long free = capacity - used;
        double fragmentation = free == 0 ? 0.0 : 1.0 - (double) largestPerSegment / free;
        return new ArenaStats(count, capacity, used, free, largest, fragmentation, live, reserves, frees, failedReserves,
            refusedFrees);
    }

    /** Each segment's {@link OccupancyBar} of {@code cells} characters, in position order, separated by commas. */
    String occupancyMap(int cells) {
        StringBuilder map = new StringBuilder();
        for (int p = 0; p < positionsInUse; p++) {
            if (allocators[p] != null) {
                if (!map.isEmpty()) {
                    map.append(',');
                }
                OccupancyBar.append(map, allocators[p], cells);
            }
        }
        return map.toString();
    }
}
