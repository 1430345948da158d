package io.mstar.transport.arena;

import java.util.function.LongConsumer;

/**
 * The slots freed last, kept by exact size and handed out again, last freed first, before the first-fit
 * tree is asked: a producer that sends a few sizes over and over gets back the slot its consumer read a
 * moment ago, whose bytes are still in the caches, in O(1), and the tree sees neither the free nor the
 * reserve.
 *
 * <p>The tree's guarantees hold for everything that matters: a reserve that no segment's tree can serve
 * first returns every kept slot to its tree (coalescing them), so keeping never makes the arena grow,
 * spill or fail; statistics are taken after the same drain. Only which fitting block a repeated size
 * gets differs from first fit. At most {@value #SIZES} sizes of {@value #DEPTH} slots each are kept, and
 * never more bytes than the owner's bound.
 *
 * <p>Not thread-safe: the arena calls it under its lock.
 */
final class RecentFrees {
    static final int SIZES = 4;
    static final int DEPTH = 8;

    private final long maxBytes;
    private final long[] sizeOf = new long[SIZES]; // bytes; 0 while a class is unused
    private final long[] slots = new long[SIZES * DEPTH];
    private final int[] count = new int[SIZES];
    private long keptBytes;

    /** @param maxBytes the most bytes kept at once */
    RecentFrees(long maxBytes) {
        this.maxBytes = maxBytes;
    }

    /** The slot of exactly {@code bytes} freed last, or -1 when none is kept. */
    long take(long bytes) {
        for (int c = 0; c < SIZES; c++) {
            if (sizeOf[c] == bytes && count[c] > 0) {
                keptBytes -= bytes;
                return slots[c * DEPTH + --count[c]];
            }
        }
        return -1;
    }

    /** Keeps a freed slot of {@code bytes}; false when there is no room (the caller frees it to its tree). */
    boolean keep(long slot, long bytes) {
        if (keptBytes + bytes > maxBytes) {
            return false;
        }
        int free = -1;
        for (int c = 0; c < SIZES; c++) {
            if (sizeOf[c] == bytes) {
                if (count[c] == DEPTH) {
                    return false;
                }
                free = c;
                break;
            }
            if (free < 0 && count[c] == 0) {
                free = c; // an empty class takes the new size
            }
        }
        if (free < 0) {
            return false;
        }
        sizeOf[free] = bytes;
        slots[free * DEPTH + count[free]++] = slot;
        keptBytes += bytes;
        return true;
    }

    /** Whether {@code slot} is kept here (freed): freeing or using it again is the caller's error. */
    boolean holds(long slot) {
        for (int c = 0; c < SIZES; c++) {
            for (int i = c * DEPTH, end = i + count[c]; i < end; i++) {
                if (slots[i] == slot) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Hands every kept slot to {@code free}, oldest last, and keeps none. */
    void drain(LongConsumer free) {
        for (int c = 0; c < SIZES; c++) {
            while (count[c] > 0) {
                free.accept(slots[c * DEPTH + --count[c]]);
            }
        }
        keptBytes = 0;
    }

    boolean isEmpty() {
        return keptBytes == 0;
    }
}
