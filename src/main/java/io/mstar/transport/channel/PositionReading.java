package io.mstar.transport.channel;

import java.util.Arrays;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The producer's side of delivery by position (docs/format.md, 12a): the consumers this mailbox sent to by
 * position, the tensors they said they keep, and the rule that learns what they handled. It reads each consumer's
 * handled position, then its own mailbox up to the tail it finds after that, and only then takes what the
 * positions passed. A refusal or kept message a consumer wrote before moving its position lies before that tail,
 * so it is applied first: the position never says "handled" of a tensor its consumer refused or kept.
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

    /** Takes the tensors a consumer's position passed and it did not keep. */
    interface Passed extends MailboxMessage.UuidSink {
        /** The consumer (its entity) whose tensors follow. */
        void from(String consumer);
    }

    private final boolean tailFirst; // test seam: the order the rule must not have
    private volatile SentByPosition[] consumers = new SentByPosition[0];
    private final Set<UUID> kept = ConcurrentHashMap.newKeySet(); // sent by position, kept past their handlers
    private final NotKept notKept = new NotKept(); // used by the reading thread

    PositionReading() {
        this(false);
    }

    /** With {@code tailFirst}, reads the tail before the positions: the wrong order, for a negative control. */
    PositionReading(boolean tailFirst) {
        this.tailFirst = tailFirst;
    }

    /** Lists a consumer sent to by position, once. */
    void list(SentByPosition consumer) {
        if (!consumer.listed) {
            synchronized (kept) {
                if (!consumer.listed) {
                    SentByPosition[] more = Arrays.copyOf(consumers, consumers.length + 1);
                    more[consumers.length] = consumer;
                    consumers = more;
                    consumer.listed = true;
                }
            }
        }
    }

    /** Whether a consumer's handled position passed a tensor sent to it: a reader has work. */
    boolean due() {
        for (SentByPosition consumer : consumers) {
            if (consumer.due()) {
                return true;
            }
        }
        return false;
    }

    /** A consumer keeps a tensor sent by position past its handler: its position does not decide it. */
    void kept(long msb, long lsb) {
        kept.add(new UUID(msb, lsb));
    }

    /**
     * Reads the consumers' positions and the mailbox; hands the tensors passed and not kept to {@code passed} and
     * returns how many; 0 when no position passed any or the mailbox's read stopped before its tail (a message not
     * yet published: the next call tries again). A consumer whose mapping was retired is dropped once read: what it
     * did not pass is its death's (the transport frees what a dead consumer held).
     */
    int read(Inbox inbox, Passed passed) {
        SentByPosition[] sentTo = consumers;
        long tail = tailFirst ? inbox.tail() : 0;
        boolean due = false;
        for (SentByPosition consumer : sentTo) {
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
        notKept.to = passed;
        for (SentByPosition consumer : sentTo) {
            passed.from(consumer.consumer);
            int taken = consumer.takePassed(notKept);
            handed += Math.max(0, taken);
            if (taken >= 0 && consumer.retired()) {
                synchronized (kept) {
                    consumers = Arrays.stream(consumers).filter(c -> c != consumer).toArray(SentByPosition[]::new);
                }
            }
        }
        return handed;
    }

    private final class NotKept implements MailboxMessage.UuidSink {
        Passed to;

        @Override
        public void accept(long msb, long lsb) {
            if (kept.isEmpty() || !kept.remove(new UUID(msb, lsb))) {
                to.accept(msb, lsb);
            }
        }
    }
}
