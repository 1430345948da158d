package io.mstar.transport.channel;

import io.mstar.transport.posix.Sleeps;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The wake of one mailbox: one 32-bit futex word in its file ({@link MailboxDescriptor#SLEEPING_OFFSET}), 1 while
 * a reader sleeps or is about to, else 0. A reader with nothing to read sleeps on it; the first sender in any
 * process that commits a record afterwards sets it back to 0 and wakes every reader. A reader that sleeps costs
 * no CPU and is woken at once (no timer slack, no yield that hands its core to a busy neighbour for a time
 * slice); a sender pays one {@code futex(FUTEX_WAKE)} per sleep, not per record: the senders after the first
 * find the word 0.
 *
 * <p>The rule (Dekker's): a reader sets the word (an atomic exchange: a full fence) before it looks at the ring a
 * last time; a sender commits its record, fences, then looks at the word. Either the reader sees the record or
 * the sender sees the word, and a sender that clears the word between the reader's look and its sleep makes the
 * sleep return at once (the word no longer holds 1). Every sleep is bounded by its timeout, so a wake that a
 * hostile or dead sender never sends costs at most that.
 */
final class Doorbell {
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    private static final long WORD = MailboxDescriptor.SLEEPING_OFFSET;

    private final MemorySegment file;
    private final long wordAddress;

    Doorbell(MemorySegment file) {
        this.file = file;
        this.wordAddress = file.address() + WORD;
    }

    /** A sender's part, after it committed a record: wakes the readers that sleep, if any. */
    void ring() {
        VarHandle.fullFence();
        if ((int) INT.getVolatile(file, WORD) != 0 && (int) INT.getAndSet(file, WORD, 0) != 0) {
            Sleeps.futexWake(wordAddress);
        }
    }

    /** Wakes every reader asleep now, whatever the word says (a closing mailbox). */
    void wakeAll() {
        INT.setVolatile(file, WORD, 0);
        Sleeps.futexWake(wordAddress);
    }

    /**
     * The reader's first part: from now on a sender that commits a record wakes this reader's {@link #sleep}. The
     * reader then looks at the ring once more and sleeps only when it found nothing.
     */
    void prepareToSleep() {
        INT.getAndSet(file, WORD, 1);
    }

    /**
     * The reader's second part: sleeps until a sender rings (or rang since {@link #prepareToSleep}) or
     * {@code timeoutNs} passes. Any number of threads may sleep at once.
     */
    void sleep(long timeoutNs) {
        Sleeps.futexWait(wordAddress, 1, timeoutNs);
    }
}
