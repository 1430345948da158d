package io.mstar.transport.acks;

import java.util.Arrays;

/**
 * Tensors awaiting their ACK, keyed by uuid (two longs): open addressing with linear probing and
 * backward-shift deletion over parallel arrays, so that adding and removing an entry allocate nothing; the
 * arrays double when the table gets half full. This class keeps the keys; a subclass keeps its values in
 * columns of its own, at the same index, and moves them when the keys move ({@link #moved},
 * {@link #cleared}, {@link #regrown}). Not thread-safe: its owner guards it.
 */
public abstract class UuidTable {
    private long[] msbs;
    private long[] lsbs;
    private boolean[] used;
    private int mask;
    private int size;

    /** @param capacity a power of two; the subclass makes its columns this long */
    protected UuidTable(int capacity) {
        if (Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("capacity must be a power of two: " + capacity);
        }
        keys(capacity);
    }

    public final int size() {
        return size;
    }

    /** The length of the columns. */
    protected final int capacity() {
        return used.length;
    }

    protected final boolean used(int i) {
        return used[i];
    }

    protected final long msb(int i) {
        return msbs[i];
    }

    protected final long lsb(int i) {
        return lsbs[i];
    }

    /** Where the uuid is, or -1. */
    protected final int find(long msb, long lsb) {
        int i = home(msb, lsb);
        while (used[i]) {
            if (msbs[i] == msb && lsbs[i] == lsb) {
                return i;
            }
            i = (i + 1) & mask;
        }
        return -1;
    }

    /** Where the uuid is, added (its columns left for the caller to write) when it was not; grows first when half full. */
    protected final int add(long msb, long lsb) {
        if ((size + 1) * 2 > used.length) {
            grow();
        }
        int i = home(msb, lsb);
        while (used[i]) {
            if (msbs[i] == msb && lsbs[i] == lsb) {
                return i;
            }
            i = (i + 1) & mask;
        }
        used[i] = true;
        msbs[i] = msb;
        lsbs[i] = lsb;
        size++;
        assert size * 2 <= used.length : "the table doubles before it is half full, so probes end";
        return i;
    }

    /**
     * Removes the entry at {@code hole}: the later entries of its probe run shift back into it, their columns
     * with them. An entry not yet visited may land at {@code hole}: a caller that scans looks at it again.
     */
    protected final void removeAt(int hole) {
        int i = hole;
        while (true) {
            i = (i + 1) & mask;
            if (!used[i]) {
                break;
            }
            int home = home(msbs[i], lsbs[i]);
            boolean movable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
            if (movable) {
                msbs[hole] = msbs[i];
                lsbs[hole] = lsbs[i];
                moved(i, hole);
                hole = i;
            }
        }
        used[hole] = false;
        cleared(hole);
        size--;
    }

    /** The values at {@code from} now belong at {@code to}. */
    protected abstract void moved(int from, int to);

    /** Nothing is at {@code i} any more: drop what its columns reference. */
    protected abstract void cleared(int i);

    /**
     * The table doubled: make columns of {@code capacity} where the value at index {@code j} comes from the old
     * columns' {@code from[j]} (or is empty where that is -1).
     */
    protected abstract void regrown(int capacity, int[] from);

    private void grow() {
        long[] oldMsbs = msbs;
        long[] oldLsbs = lsbs;
        boolean[] oldUsed = used;
        keys(oldUsed.length * 2);
        int[] from = new int[used.length];
        Arrays.fill(from, -1);
        for (int k = 0; k < oldUsed.length; k++) {
            if (oldUsed[k]) {
                int j = home(oldMsbs[k], oldLsbs[k]);
                while (used[j]) {
                    j = (j + 1) & mask;
                }
                used[j] = true;
                msbs[j] = oldMsbs[k];
                lsbs[j] = oldLsbs[k];
                from[j] = k;
            }
        }
        regrown(used.length, from);
    }

    private void keys(int capacity) {
        msbs = new long[capacity];
        lsbs = new long[capacity];
        used = new boolean[capacity];
        mask = capacity - 1;
    }

    private int home(long msb, long lsb) {
        long h = (msb ^ Long.rotateLeft(lsb, 29)) * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }
}
