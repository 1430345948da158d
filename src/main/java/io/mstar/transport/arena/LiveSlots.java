package io.mstar.transport.arena;

/**
 * The live slots of one allocator: start granule to size in granules, and a hint of where the free
 * blocks around the slot were (see {@link FirstFitAllocator}). Open addressing with linear probing and
 * backward-shift deletion over a {@code long} array (start and size packed in one element, so a probe
 * reads one array) and a parallel {@code int} array of hints; both double when half full, so operations
 * allocate nothing and probe about two elements on average. Not thread-safe.
 */
final class LiveSlots {
    /** What {@link #get} and {@link #remove} return for a start that holds no live slot; never a size. */
    static final int NONE = 0;
    private static final long EMPTY = 0;

    private long[] table = new long[64];
    private int[] hints = new int[64];
    private int shift = Integer.SIZE - 6;
    private int size;

    int size() {
        return size;
    }

    /** Records a live slot; {@code start} must not hold one already. */
    void put(int start, int length, int hint) {
        if (2 * (size + 1) > table.length) {
            resize(table.length * 2);
        }
        int mask = table.length - 1;
        int i = home(start);
        while (table[i] != EMPTY) {
            i = (i + 1) & mask;
        }
        table[i] = pack(start, length);
        hints[i] = hint;
        size++;
    }

    int get(int start) {
        int i = find(start);
        return i < 0 ? NONE : length(i);
    }

    /** Removes the slot at {@code start} and returns its size, or {@link #NONE}. */
    int remove(int start) {
        int i = find(start);
        if (i < 0) {
            return NONE;
        }
        int length = length(i);
        removeAt(i);
        return length;
    }

    /** The position of the slot at {@code start}, or -1; valid until the next put or remove. */
    int find(int start) {
        int mask = table.length - 1;
        long key = (long) (start + 1) << 32;
        for (int i = home(start); table[i] != EMPTY; i = (i + 1) & mask) {
            if ((table[i] & 0xFFFF_FFFF_0000_0000L) == key) {
                return i;
            }
        }
        return -1;
    }

    int length(int position) {
        return (int) table[position];
    }

    int hint(int position) {
        return hints[position];
    }

    void removeAt(int i) {
        // Backward shift: move later entries of the probe run into the hole unless that would put one
        // before its home position, so lookups never need tombstones.
        int mask = table.length - 1;
        int hole = i;
        for (int j = (i + 1) & mask; table[j] != EMPTY; j = (j + 1) & mask) {
            int home = home((int) (table[j] >>> 32) - 1);
            if (((j - home) & mask) >= ((j - hole) & mask)) {
                table[hole] = table[j];
                hints[hole] = hints[j];
                hole = j;
            }
        }
        table[hole] = EMPTY;
        size--;
    }

    // Fibonacci hashing: the top bits of start * 2^32 / phi spread consecutive starts.
    private int home(int start) {
        return (start * 0x9E3779B9) >>> shift;
    }

    // Start + 1 in the high half keeps every packed slot non-zero (start 0 included).
    private static long pack(int start, int length) {
        return (long) (start + 1) << 32 | length;
    }

    private void resize(int capacity) {
        long[] old = table;
        int[] oldHints = hints;
        table = new long[capacity];
        hints = new int[capacity];
        shift = Integer.SIZE - Integer.numberOfTrailingZeros(capacity);
        int mask = capacity - 1;
        for (int k = 0; k < old.length; k++) {
            if (old[k] != EMPTY) {
                int i = home((int) (old[k] >>> 32) - 1);
                while (table[i] != EMPTY) {
                    i = (i + 1) & mask;
                }
                table[i] = old[k];
                hints[i] = oldHints[k];
            }
        }
    }
}
