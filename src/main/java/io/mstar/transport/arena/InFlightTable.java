package io.mstar.transport.arena;

import io.mstar.transport.acks.UuidTable;

import java.util.Arrays;
import java.util.function.Predicate;

/**
 * Tensors sent and not yet ACKed: uuid to slot handle, size, send time and the consumer that holds it, in
 * primitive columns of a {@link UuidTable}, so that sending and ACKing allocate nothing. Not thread-safe:
 * the arena transport guards it with its own lock.
 */
final class InFlightTable extends UuidTable {
    static final long MISSING = -1;
    private static final int INITIAL_CAPACITY = 256;

    private long[] slots = new long[INITIAL_CAPACITY];
    private long[] sizes = new long[INITIAL_CAPACITY];
    private long[] sentAt = new long[INITIAL_CAPACITY];
    private String[] holders = new String[INITIAL_CAPACITY]; // the consumer (liveness key) each went to, or null
    private long removedSentAt; // of the last entry remove() found
    private long removedNbytes; // of the last entry remove() found

    InFlightTable() {
        super(INITIAL_CAPACITY);
        Arrays.fill(slots, MISSING);
    }

    void put(long msb, long lsb, long slot, long nbytes, long sentAtNs) {
        int i = add(msb, lsb);
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
        for (int i = 0; i < capacity(); i++) {
            if (used(i) && holders[i] != null && which.test(holders[i])) {
                visitor.held(msb(i), lsb(i), holders[i]);
            }
        }
    }

    /** Receives one tensor found by {@link #visitHeldBy}. */
    @FunctionalInterface
    interface HeldVisitor {
        void held(long msb, long lsb, String holder);
    }

    /** The index of the entry sent first, or -1 when empty: O(capacity), for stats and the stall check. */
    int oldest() {
        int oldest = -1;
        for (int i = 0; i < capacity(); i++) {
            if (used(i) && (oldest < 0 || sentAt[i] - sentAt[oldest] < 0)) {
                oldest = i;
            }
        }
        return oldest;
    }

    long sentAt(int i) {
        return sentAt[i];
    }

    String holder(int i) {
        return holders[i];
    }

    long uuidMsb(int i) {
        return msb(i);
    }

    long uuidLsb(int i) {
        return lsb(i);
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
        removedNbytes = sizes[i];
        removeAt(i);
        assert !contains(msb, lsb) : "a uuid is in the table at most once";
        return slot;
    }

    /** The send time of the entry the last successful {@link #remove} removed. */
    long removedSentAt() {
        return removedSentAt;
    }

    /** The tensor size of the entry the last successful {@link #remove} removed. */
    long removedNbytes() {
        return removedNbytes;
    }

    /** The slot of a tensor in the table, or {@link #MISSING}; its size is then {@link #nbytesOf}. */
    long slotOf(long msb, long lsb) {
        int i = find(msb, lsb);
        return i < 0 ? MISSING : slots[i];
    }

    long nbytesOf(long msb, long lsb) {
        int i = find(msb, lsb);
        return i < 0 ? -1 : sizes[i];
    }

    /** Removes and returns, one at a time, the slots of entries sent before {@code cutoffNs}. */
    void removeOlderThan(long cutoffNs, ExpiredVisitor visitor) {
        for (int i = 0; i < capacity(); ) {
            if (used(i) && sentAt[i] - cutoffNs < 0) {
                long msb = msb(i);
                long lsb = lsb(i);
                long slot = slots[i];
                long nbytes = sizes[i];
                long age = sentAt[i];
                removeAt(i);
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

    @Override
    protected void moved(int from, int to) {
        slots[to] = slots[from];
        sizes[to] = sizes[from];
        sentAt[to] = sentAt[from];
        holders[to] = holders[from];
    }

    @Override
    protected void cleared(int i) {
        slots[i] = MISSING;
        holders[i] = null;
    }

    @Override
    protected void regrown(int capacity, int[] from) {
        long[] oldSlots = slots;
        long[] oldSizes = sizes;
        long[] oldSentAt = sentAt;
        String[] oldHolders = holders;
        slots = new long[capacity];
        sizes = new long[capacity];
        sentAt = new long[capacity];
        holders = new String[capacity];
        for (int j = 0; j < capacity; j++) {
            int k = from[j];
            slots[j] = k < 0 ? MISSING : oldSlots[k];
            if (k >= 0) {
                sizes[j] = oldSizes[k];
                sentAt[j] = oldSentAt[k];
                holders[j] = oldHolders[k];
            }
        }
    }
}
