package io.mstar.transport.channel;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The tensors this process sent by position to one consumer incarnation, oldest first, until that consumer's
 * handled position passes them (docs/format.md, 12a).
 *
 * <p>A sender appends under {@link #lock()} together with its ring write, so the entries are in the order of their
 * end positions in the ring. Taking the passed ones only tries the lock: a sender that waits on a full ring
 * holds it, and the thread that reads this process's mailbox must not wait behind it.
 */
final class SentByPosition {
    private final LongSupplier handledNow; // the consumer's handled position, read from its mailbox (acquire)
    private final ReentrantLock lock = new ReentrantLock();
    private long[] entries = new long[3 * 64]; // end, uuid msb, uuid lsb; a circular queue; guarded by lock
    private int first; // index of the oldest entry's end; guarded by lock
    private int size; // guarded by lock
    private volatile long oldestEnd = Long.MAX_VALUE; // whether the handled position passed any, without the lock
    private volatile long finalHandled = -1; // the handled position when the consumer's mapping was retired
    volatile boolean listed; // in its mailbox's list of consumers sent to by position
    private long seen; // the handled position read before this process's mailbox was read to its tail

    final String consumer; // its entity

    SentByPosition(String consumer, LongSupplier handledNow) {
        this.consumer = consumer;
        this.handledNow = handledNow;
    }

    /** The consumer's handled position: from its mailbox, or as it was when the mapping was retired. */
    long handled() {
        long retired = finalHandled;
        if (retired >= 0) {
            return retired;
        }
        try {
            return handledNow.getAsLong();
        } catch (IllegalStateException unmapped) {
            return Math.max(0, finalHandled); // retired meanwhile
        }
    }

    /** The consumer's mapping goes: its position as it is now is the last one this process will learn. */
    void retire() {
        finalHandled = Math.max(0, handled());
    }

    boolean retired() {
        return finalHandled >= 0;
    }

    /** Whether the consumer's position passed an entry. */
    boolean due() {
        return oldestEnd <= handled();
    }

    /** Reads the handled position before the mailbox is read to its tail, and keeps it; returns whether it passed any. */
    boolean see() {
        seen = handled();
        return oldestEnd <= seen;
    }

    void lock() {
        lock.lock();
    }

    void unlock() {
        lock.unlock();
    }

    /** Appends a tensor whose record ends at {@code end} in the consumer's ring; the lock is held. */
    void add(long end, long msb, long lsb) {
        if (3 * size == entries.length) {
            long[] bigger = new long[2 * entries.length];
            int tail = entries.length - first;
            System.arraycopy(entries, first, bigger, 0, tail);
            System.arraycopy(entries, 0, bigger, tail, first);
            entries = bigger;
            first = 0;
        }
        int at = (first + 3 * size) % entries.length;
        entries[at] = end;
        entries[at + 1] = msb;
        entries[at + 2] = lsb;
        if (size++ == 0) {
            oldestEnd = end;
        }
    }

    /**
     * Hands the entries the position {@link #see seen} last passed to {@code sink}, oldest first, and forgets them;
     * returns how many, or -1 when a sender holds the lock (the caller tries again later).
     */
    int takePassed(MailboxMessage.UuidSink sink) {
        if (!lock.tryLock()) {
            return -1;
        }
        try {
            int n = 0;
            while (size > 0 && entries[first] <= seen) {
                long msb = entries[first + 1];
                long lsb = entries[first + 2];
                first = (first + 3) % entries.length;
                size--;
                n++;
                sink.accept(msb, lsb);
            }
            return n;
        } finally {
            oldestEnd = size == 0 ? Long.MAX_VALUE : entries[first];
            lock.unlock();
        }
    }
}
