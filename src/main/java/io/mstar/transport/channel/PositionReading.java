package io.mstar.transport.channel;

/**
 * The producer's side of delivery by position (docs/format.md, 12a): it reads each consumer's handled position,
 * then its own mailbox up to the tail it finds after that, and only then takes what the positions passed. A
 * refusal or kept message a consumer wrote before moving its position lies before that tail, so it is applied
 * first: the position never says "handled" of a tensor its consumer refused or kept.
 */
final class PositionReading {
    /** This process's own mailbox, as the rule reads it. */
    interface Inbox {
        /** The writers' tail: every message published so far ends at or before it. */
        long tail();

        /** Where the reader reads next. */
        long head();

        /** Reads what waits, applying each ACK, refusal and kept message; returns the messages read. */
        int read();
    }

    private final boolean tailFirst; // test seam: the order the rule must not have

    PositionReading() {
        this(false);
    }

    /** With {@code tailFirst}, reads the tail before the positions: the wrong order, for a negative control. */
    PositionReading(boolean tailFirst) {
        this.tailFirst = tailFirst;
    }

    /**
     * Reads the consumers' positions and the mailbox; returns the tensors passed, handed to {@code passed}, or 0
     * when no position passed any or the mailbox's read stopped before its tail (a message not yet published: the
     * next call tries again).
     */
    int read(SentByPosition[] consumers, Inbox inbox, Passed passed) {
        long tail = tailFirst ? inbox.tail() : 0;
        boolean due = false;
        for (SentByPosition consumer : consumers) {
            due |= consumer.see();
        }
        if (!due) {
            return 0;
        }
        if (!tailFirst) {
            tail = inbox.tail();
        }
        while (inbox.head() - tail < 0 && inbox.read() > 0) {
            Thread.onSpinWait();
        }
        if (inbox.head() - tail < 0) {
            return 0;
        }
        int handed = 0;
        for (SentByPosition consumer : consumers) {
            passed.from(consumer.consumer);
            handed += Math.max(0, consumer.takePassed(passed));
        }
        return handed;
    }

    /** Takes the tensors a consumer's position passed. */
    interface Passed extends MailboxMessage.UuidSink {
        /** The consumer (its entity) whose tensors follow. */
        void from(String consumer);
    }
}
