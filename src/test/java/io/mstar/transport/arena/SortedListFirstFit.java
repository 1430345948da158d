package io.mstar.transport.arena;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The deliberately simple reference: free blocks in an address-sorted array, first fit by a linear
 * scan, coalescing by binary search and array shifts (the algorithm of the M* Rust arena). Used as
 * the model in randomized tests and as the baseline in benchmarks.
 */
public final class SortedListFirstFit {
    public static final long FULL = -1;
    private static final long ALIGN = FirstFitAllocator.ALIGNMENT_BYTES;

    private final long capacityBytes;
    private long[] starts = new long[16];
    private long[] sizes = new long[16];
    private int count;
    private final Map<Long, Long> live = new HashMap<>();

    public SortedListFirstFit(long capacityBytes) {
        this.capacityBytes = capacityBytes;
        starts[0] = 0;
        sizes[0] = capacityBytes;
        count = 1;
    }

    public long reserve(long sizeBytes) {
        long aligned = (sizeBytes + ALIGN - 1) / ALIGN * ALIGN;
        for (int i = 0; i < count; i++) {
            if (sizes[i] >= aligned) {
                long offset = starts[i];
                if (sizes[i] == aligned) {
                    removeAt(i);
                } else {
                    starts[i] += aligned;
                    sizes[i] -= aligned;
                }
                live.put(offset, aligned);
                return offset;
            }
        }
        return FULL;
    }

    /** Returns false (and changes nothing) unless a live slot starts at offset. */
    public boolean free(long offset) {
        Long length = live.remove(offset);
        if (length == null) {
            return false;
        }
        int i = Arrays.binarySearch(starts, 0, count, offset);
        int insertAt = -i - 1;
        boolean joinPrev = insertAt > 0 && starts[insertAt - 1] + sizes[insertAt - 1] == offset;
        boolean joinNext = insertAt < count && starts[insertAt] == offset + length;
        if (joinPrev && joinNext) {
            sizes[insertAt - 1] += length + sizes[insertAt];
            removeAt(insertAt);
        } else if (joinPrev) {
            sizes[insertAt - 1] += length;
        } else if (joinNext) {
            starts[insertAt] = offset;
            sizes[insertAt] += length;
        } else {
            insertAt(insertAt, offset, length);
        }
        return true;
    }

    public long capacityBytes() {
        return capacityBytes;
    }

    public int freeBlocks() {
        return count;
    }

    public long freeBlockStart(int i) {
        return starts[i];
    }

    public long freeBlockSize(int i) {
        return sizes[i];
    }

    public long largestFreeBlockBytes() {
        long largest = 0;
        for (int i = 0; i < count; i++) {
            largest = Math.max(largest, sizes[i]);
        }
        return largest;
    }

    public int liveSlots() {
        return live.size();
    }

    private void removeAt(int i) {
        System.arraycopy(starts, i + 1, starts, i, count - i - 1);
        System.arraycopy(sizes, i + 1, sizes, i, count - i - 1);
        count--;
    }

    private void insertAt(int i, long start, long size) {
        if (count == starts.length) {
            starts = Arrays.copyOf(starts, count * 2);
            sizes = Arrays.copyOf(sizes, count * 2);
        }
        System.arraycopy(starts, i, starts, i + 1, count - i);
        System.arraycopy(sizes, i, sizes, i + 1, count - i);
        starts[i] = start;
        sizes[i] = size;
        count++;
    }
}
