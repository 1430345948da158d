package io.mstar.transport.arena;

import java.util.Arrays;
import java.util.function.Predicate;

/**
 * Tensors sent and not yet ACKed: uuid (two longs) to slot handle, size, send time and the consumer that
 * holds it. Open addressing
 * with linear probing and backward-shift deletion, in parallel primitive arrays, so that sending and
 * ACKing allocate nothing; the arrays double when the table gets half full. Not thread-safe: the arena
 * transport guards it with its own lock.
 */
final class InFlightTable {
    static final long MISSING = -1;

    private long[] msbs;
    private long[] lsbs;
    private long[] slots;
    private long[] sizes;
    private long[] sentAt;
    private String[] holders; // the consumer (liveness key) each tensor went to, or null
    private boolean[] used;
    private int mask;
    private int size;
    private long removedSentAt; // of the last entry remove() found

    InFlightTable() {
        allocate(256);
    }

    int size() {
        return size;
    }

    void put(long msb, long lsb, long slot, long nbytes, long sentAtNs) {
        if ((size + 1) * 2 > used.length) {
            rehash(used.length * 2);
        }
        int i = home(msb, lsb);
        while (used[i]) {
            if (msbs[i] == msb && lsbs[i] == lsb) {
                break;
            }
            i = (i + 1) & mask;
        }
        if (!used[i]) {
            size++;
        }
        assert size * 2 <= used.length : "the table doubles before it is half full, so probes end";
        used[i] = true;
        msbs[i] = msb;
        lsbs[i] = lsb;
        slots[i] = slot;
        sizes[i] = nbytes;
        sentAt[i] = sentAtNs;
        holders[i] = null;
    }

    /** Records which consumer holds the tensor; returns whether it is in the table. */
    boolean setHolder(long msb, long lsb, String holder) {
        int i = find(msb, lsb);
        if (i >= 0) {
            holders[i] = holder;
        }
        return i >= 0;
    }

    /** Tells {@code visitor} each tensor whose holder {@code which} accepts (the table is unchanged). */
    void visitHeldBy(Predicate<String> which, HeldVisitor visitor) {
        for (int i = 0; i < used.length; i++) {
            if (used[i] && holders[i] != null && which.test(holders[i])) {
                visitor.held(msbs[i], lsbs[i], holders[i]);
            }
        }
    }

    /** Receives one tensor found by {@link #visitHeldBy}. */
    @FunctionalInterface
    interface HeldVisitor {
        void held(long msb, long lsb, String holder);
    }

    boolean contains(long msb, long lsb) {
        return find(msb, lsb) >= 0;
    }

    /** Removes the entry and returns its slot handle, or {@link #MISSING}; its send time is then {@link #removedSentAt()}. */
    long remove(long msb, long lsb) {
        int i = find(msb, lsb);
        if (i < 0) {
            return MISSING;
        }
        long slot = slots[i];
        removedSentAt = sentAt[i];
        shiftBack(i);
        size--;
        assert size >= 0 && !contains(msb, lsb) : "a uuid is in the table at most once";
        return slot;
    }

    /** The send time of the entry the last successful {@link #remove} removed. */
    long removedSentAt() {
        return removedSentAt;
    }

    /** Removes and returns, one at a time, the slots of entries sent before {@code cutoffNs}. */
    void removeOlderThan(long cutoffNs, ExpiredVisitor visitor) {
        for (int i = 0; i < used.length; ) {
            if (used[i] && sentAt[i] - cutoffNs < 0) {
                long msb = msbs[i];
                long lsb = lsbs[i];
                long slot = slots[i];
                long nbytes = sizes[i];
                long age = sentAt[i];
                shiftBack(i);
                size--;
                visitor.expired(msb, lsb, slot, nbytes, age);
                // The shift may have moved an unvisited entry into i: look at i again.
            } else {
                i++;
            }
        }
    }

    /** Receives one entry removed by {@link #removeOlderThan}. */
    @FunctionalInterface
    interface ExpiredVisitor {
        void expired(long msb, long lsb, long slot, long nbytes, long sentAtNs);
    }

    private int find(long msb, long lsb) {
        int i = home(msb, lsb);
        while (used[i]) {
            if (msbs[i] == msb && lsbs[i] == lsb) {
                return i;
            }
            i = (i + 1) & mask;
        }
        return -1;
    }

    private void shiftBack(int hole) {
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
                slots[hole] = slots[i];
                sizes[hole] = sizes[i];
                sentAt[hole] = sentAt[i];
                holders[hole] = holders[i];
                hole = i;
            }
        }
        used[hole] = false;
        holders[hole] = null;
    }

    private int home(long msb, long lsb) {
        long h = (msb ^ Long.rotateLeft(lsb, 29)) * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }

    private void rehash(int capacity) {
        long[] oldMsbs = msbs;
        long[] oldLsbs = lsbs;
        long[] oldSlots = slots;
        long[] oldSizes = sizes;
        long[] oldSentAt = sentAt;
        String[] oldHolders = holders;
        boolean[] oldUsed = used;
        allocate(capacity);
        size = 0;
        for (int i = 0; i < oldUsed.length; i++) {
            if (oldUsed[i]) {
                put(oldMsbs[i], oldLsbs[i], oldSlots[i], oldSizes[i], oldSentAt[i]);
                setHolder(oldMsbs[i], oldLsbs[i], oldHolders[i]);
            }
        }
    }

    private void allocate(int capacity) {
        msbs = new long[capacity];
        lsbs = new long[capacity];
        slots = new long[capacity];
        sizes = new long[capacity];
        sentAt = new long[capacity];
        holders = new String[capacity];
        used = new boolean[capacity];
        Arrays.fill(slots, MISSING);
        mask = capacity - 1;
    }
}
