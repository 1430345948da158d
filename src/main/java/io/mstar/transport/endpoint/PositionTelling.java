package io.mstar.transport.endpoint;

import io.mstar.transport.TensorChannel;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.PeerUnavailableException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * An endpoint's side of delivery by position (docs/format.md, 12a). As a consumer: a tensor sent by position needs
 * no ACK once handled; one kept past its handler is told with a kept message; each message's end moves the handled
 * position once its records were handled; and each producer so served is woken once per poll. As a producer: what
 * the consumers' positions passed is read with the mailbox ({@link ShmMailbox#readPositions}). Does nothing off our
 * mailboxes ({@code mailbox} null).
 */
final class PositionTelling {
    private static final Logger LOG = LoggerFactory.getLogger(PositionTelling.class);

    private final ShmMailbox mailbox;
    private final List<String> toWake = new ArrayList<>(); // producers to wake after the handlers; used by the handling thread
    private volatile boolean stopped; // a message owed before the position could not be written: it moves no more
    private volatile long handledEnd; // the handled position reached, by the handling thread
    private volatile long handledAt; // when
    private volatile long publishedEnd; // the handled position published

    PositionTelling(ShmMailbox mailbox) {
        this.mailbox = mailbox;
    }

    /** Whether this endpoint learns from its consumers' handled positions (it reads our own mailbox). */
    boolean active() {
        return mailbox != null;
    }

    /** Whether a whole, validated-on-receive record was sent by position to this consumer. */
    boolean byPosition(MemorySegment record, long at) {
        return mailbox != null && DescriptorCodec.byPosition(record, at);
    }

    /** A tensor sent by position was handled: its producer is woken after the poll to read our position. */
    void handled(String producer) {
        if (!toWake.contains(producer)) {
            toWake.add(producer);
        }
    }

    /** A tensor sent by position is kept past its handler: its producer hears so before our position passes it. */
    void kept(String producer, long msb, long lsb) {
        try {
            mailbox.sendKept(producer, msb, lsb);
        } catch (PeerUnavailableException e) {
            LOG.debug("kept not told, its producer is gone: {}", e.getMessage());
        }
    }

    /**
     * The records of a message ending at {@code end} (0: not a message's last record) were handled, and the messages
     * they needed sent. The position is published at the end of the poll ({@link #publish}), as the ACKs of a
     * poll's quick tensors are gathered, or at once when {@code now} (a slow handler: its producer should not wait
     * for the rest of the poll).
     */
    void messageHandled(long end, long nowNs, boolean now) {
        if (end > 0 && mailbox != null && !stopped) {
            handledAt = nowNs;
            handledEnd = end;
        }
        if (now) {
            publish();
        }
    }

    /** Publishes the handled position reached, if it moved, and wakes the producers served, once each. */
    void publish() {
        publishPosition();
        for (int k = 0; k < toWake.size(); k++) {
            mailbox.wakeProducer(toWake.get(k));
        }
        toWake.clear();
    }

    /**
     * For the ACK thread while a handler runs on (one that waits on its own window): publishes the position its poll
     * reached if that is older than {@code ns}; returns whether one reached stays unpublished.
     */
    boolean publishIfOlderThan(long ns) {
        if (handledEnd > publishedEnd && System.nanoTime() - handledAt > ns) {
            publishPosition();
        }
        return handledEnd > publishedEnd;
    }

    private synchronized void publishPosition() { // two threads may publish: the position never moves back
        long end = handledEnd;
        if (end > publishedEnd && !stopped) {
            publishedEnd = end;
            mailbox.handled(end);
        }
    }

    /**
     * A refusal or kept message owed to a producer could not be written (its mailbox stayed full, an Error): the
     * handled position stops where it is for good, so it never says "handled" of that tensor. The producers then
     * learn of what follows when this consumer is gone (CONSUMER_DIED) or at their slots' time to live.
     */
    void stop(Throwable why) {
        if (!stopped) {
            stopped = true;
            LOG.warn("a refusal or kept message owed to a producer was not written; this consumer's handled position"
                + " stops here (its producers are told at its exit or at their slots' TTL): {}", why.toString());
        }
    }


    /** Whether a consumer's handled position passed a tensor we sent by position: a reader of ours has work. */
    boolean due() {
        return mailbox != null && mailbox.positionsDue();
    }

    /** Takes what the consumers' positions passed, as their ACKs; the mailbox's reading lock is held. */
    void read(TensorChannel.RecordListener reader) {
        if (mailbox != null) {
            mailbox.readPositions(reader);
        }
    }
}
