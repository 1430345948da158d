package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.exceptions.StaleTensorException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Who reads an endpoint's mailbox, and how its handlers get their tensors.
 *
 * <p>Two locks, so that a handler never stops the ACKs. {@code reading} is held only while the ring is read: a
 * handler's poll, a sender after a small tensor, an outcome poll or the ACK thread takes what waits, applies each
 * ACK to the transport on the way, and lets go. The descriptor records it took are copied out (into the poll's
 * {@link RecordBatch}, or parked for the next handler when the reader has none) and handed to the handlers only
 * after {@code reading} was let go, under {@code handling}, which keeps one poll's handlers at a time, in order. A
 * handler may run, or block, for as long as it likes: the ACK thread, or a sender, reads the ACKs meanwhile and
 * the outcomes they decide are told.
 *
 * <p>Whoever lets go of {@code reading} tells the outcomes its reading decided ({@link Outcomes#tellDecided}):
 * the ACK thread all of them, any other thread a few, leaving the rest to the ACK thread, which it wakes.
 */
final class MailboxReading {
    private static final Logger LOG = LoggerFactory.getLogger(TensorEndpoint.class);
    /** How long the application may leave the mailbox unread before the ACK thread reads it. */
    static final long IDLE_READ_NS = 1_000_000;
    /** How many outcomes a thread of the application tells after it read; the ACK thread tells the rest. */
    static final int APPLICATION_TELLS = 64;
    /** The most messages close reads for ACKs: one pass over a full ring's worth, not a stream that goes on. */
    private static final int CLOSE_READS = 4096;

    private final TensorChannel.Records records;
    private final TensorTransport transport;
    private final Outcomes outcomes;
    private final MessageWait wait;
    private final GatheredAcks gathered;
    private final ShmMailbox local; // told while a handler runs, so that its close waits for it; null off our mailboxes
    private final ReentrantLock reading = new ReentrantLock();
    private final ReentrantLock handling = new ReentrantLock();
    private final ParkedRecords parked = new ParkedRecords(); // guarded by reading
    private final Reader reader = new Reader(); // guarded by reading
    private final RecordBatch batch = new RecordBatch(); // guarded by handling
    private final PositionTelling positions; // the handling thread's and the reading lock holder's
    private final Incoming incoming; // guarded by handling
    private final Activity appPolls = new Activity(); // a thread with a handler, or one polling outcomes, read it
    private volatile long handlersSince; // when the handlers of the poll handing over now began; 0 when none runs
    private long handlerStarted; // when the handler running now began; guarded by handling
    private boolean closedByHandler; // a handler closed the endpoint: its poll hands over no more; guarded by handling
    private int handing; // the index in the batch of the record handed over now; guarded by handling

    MailboxReading(TensorChannel.Records records, TensorTransport transport, Outcomes outcomes, MessageWait wait,
                   Incoming incoming, ShmMailbox local) {
        this.records = records;
        this.local = local;
        this.positions = new PositionTelling(local);
        this.transport = transport;
        this.outcomes = outcomes;
        this.wait = wait;
        this.incoming = incoming;
        this.gathered = new GatheredAcks(records);
    }

    /**
     * Takes up to {@code limit} messages, then hands the tensors among them (after those parked before) to
     * {@code handler}, each ACKed when it returns unless kept; returns the messages read.
     */
    int poll(TensorHandler handler, int limit) {
        if (handling.isHeldByCurrentThread()) {
            throw new IllegalStateException("poll or receive from a handler: return from the handler instead");
        }
        handling.lock();
        try {
            int read = 0;
            reading.lock();
            try {
                appPolls.acted();
                read += parked.moveTo(batch, limit);
                if (read < limit) {
                    reader.batch = batch;
                    try {
                        read += records.pollRecords(reader, limit - read);
                    } finally {
                        reader.batch = null;
                    }
                }
                positions.read(reader);
            } finally {
                if (!ReadingSeams.HANDLERS_HOLD_THE_MAILBOX) {
                    unlockReading(0); // told once the handlers ran: a listener may poll then
                }
            }
            try {
                handOver(handler);
            } finally {
                if (ReadingSeams.HANDLERS_HOLD_THE_MAILBOX) {
                    unlockReading(0);
                }
            }
            return read;
        } finally {
            batch.clear();
            handling.unlock();
            tellDecided(APPLICATION_TELLS);
        }
    }

    // The batch's tensors to the handler, in order, the mailbox let go.
    private void handOver(TensorHandler handler) {
        if (batch.size() == 0) {
            return;
        }
        if (local != null) {
            local.handlerRuns(true); // a close (a SIGTERM's) keeps us alive to producers until the handlers return
        }
        handlersSince = System.nanoTime();
        handlerStarted = handlersSince;
        closedByHandler = false;
        int i = 0;
        try {
            for (; i < batch.size() && !closedByHandler; i++) {
                handing = i;
                dispatch(batch.from(i), batch.records(), batch.at(i), batch.length(i), batch.end(i), handler);
            }
        } catch (Throwable e) { // a handler's Error: its tensor is ACKed, the poll's later ones wait for the next poll
            if (!ReadingSeams.ERROR_DROPS_ITS_POLL) {
                parkFrom(i + 1);
            }
            throw e;
        } finally {
            handlersSince = 0;
            try {
                if (!ReadingSeams.ERROR_DROPS_ITS_POLL || i == batch.size()) {
                    gathered.send();
                }
            } finally {
                positions.publish(); // the poll's position, once
                if (local != null) {
                    local.handlerRuns(false);
                }
            }
        }
    }

    // The batch's records from index `first` on, parked ahead of any parked since: the next poll hands them over.
    private void parkFrom(int first) {
        reading.lock();
        try {
            parked.parkFrom(batch, first);
        } finally {
            reading.unlock(); // nothing decided here: no telling
        }
    }

    /**
     * The endpoint closes on this thread from inside a handler (a "stop" tensor): that tensor is handled, so it and
     * the ACKs its poll gathered go now, while the mailbox is open; the poll's later tensors are not handed over.
     */
    void closingFromHandler() {
        if (handling.isHeldByCurrentThread()) {
            closedByHandler = true;
            gathered.send();
            positions.publish(); // the position its poll reached, while the mailbox is open
            incoming.ackNow();
            for (int k = handing + 1; k < batch.size(); k++) {
                refuse(batch.from(k), batch.records(), batch.at(k), batch.length(k));
            }
        }
    }

    /** Refuses the records parked for a poll that will not come (the endpoint closes): their producers hear at once. */
    private void refuseParked() {
        List<ParkedRecords.Parked> unhanded;
        reading.lock();
        try {
            unhanded = parked.takeAll();
        } finally {
            reading.unlock();
        }
        for (ParkedRecords.Parked p : unhanded) {
            refuse(p.from(), MemorySegment.ofArray(p.record()), 0, p.record().length);
        }
    }

    // Refuses a record no handler will have, sent to its producer: a definite failure, so it may send it again.
    private void refuse(String from, MemorySegment record, long at, int length) {
        if (DescriptorCodec.recordLength(record, at, length) == length) {
            ack(from, DescriptorCodec.uuidMsb(record, at), DescriptorCodec.uuidLsb(record, at), true);
        }
    }

    /** Waits until a message may wait, a record was parked, or the timeout passes. */
    void awaitRecord(long timeoutNs) {
        wait.awaitMessage(timeoutNs, parked.anyParked, true);
    }

    // Hands one record's tensor to the handler, then ACKs it (a small one after a quick handler gathered with the
    // poll's next; one sent by position needs none, or a kept message), or refuses it (its slot reused, or a check
    // failed). A record that ends its message (`end` > 0) then moves the handled position past the message.
    private void dispatch(String from, MemorySegment record, long at, int length, long end, TensorHandler handler) {
        boolean refused = false;
        try {
            incoming.deliver(from, record, at, length, handler, transport);
        } catch (StaleTensorException e) {
            refused = true; // counted and logged where the stamp was read; the producer hears of it below
        } catch (RuntimeException e) {
            if (incoming.handedOver()) {
                LOG.warn("a handler threw (the tensor is ACKed, the next ones are handed over): from={}", from, e);
            } else { // a typed refusal of the record itself: a field out of range, a file not ours to map
                refused = true; // not ACKed: no handler had it
                if (local != null) {
                    local.refusedRecord(length, e);
                }
            }
        } finally {
            long now = System.nanoTime();
            boolean quick = now - handlerStarted < GatheredAcks.QUICK_NS;
            handlerStarted = now;
            boolean whole = DescriptorCodec.recordLength(record, at, length) == length;
            boolean byPosition = whole && positions.byPosition(record, at);
            try { // a kept tensor (even one whose handler threw after keep()) is ACKed when its view closes
                if (!incoming.keptOrAcked() && whole) {
                    long msb = DescriptorCodec.uuidMsb(record, at);
                    long lsb = DescriptorCodec.uuidLsb(record, at);
                    if (byPosition && !refused) {
                        positions.handled(from); // the position says so
                    } else if (quick && !refused && DescriptorCodec.nbytes(record, at) <= GatheredAcks.SMALL_BYTES) {
                        gathered.add(from, msb, lsb, now);
                    } else {
                        gathered.send(); // in order: what was gathered before this one
                        ack(from, msb, lsb, refused);
                    }
                } else if (byPosition && incoming.kept()) {
                    positions.kept(from, DescriptorCodec.uuidMsb(record, at), DescriptorCodec.uuidLsb(record, at));
                }
            } catch (RuntimeException | Error e) {
                if (byPosition) {
                    positions.stop(e); // a refusal or kept message owed and not written: the position never passes it
                }
                throw e;
            }
            positions.messageHandled(end, now, !quick); // after the refusal or kept message it needed: they go first
        }
    }

    /** This endpoint's side of delivery by position. */
    PositionTelling positions() {
        return positions;
    }

    /** What the handlers running now have run for, for the stall's WARN; null when none runs. */
    String handlerNow() {
        long since = handlersSince;
        return since == 0 ? null : "the handlers of one poll of this process have run for "
            + (System.nanoTime() - since) / 1_000_000 + " ms (they do not hold the ACKs)";
    }

    /**
     * Sends an ACK to a tensor's producer, or a refusal when the tensor's slot was reused under the read; a
     * producer that is gone needs neither.
     */
    void ack(String producer, long msb, long lsb, boolean refused) {
        try {
            if (refused) {
                records.sendRefusal(producer, msb, lsb);
            } else {
                records.sendAck(producer, msb, lsb);
            }
        } catch (PeerUnavailableException e) {
            LOG.debug("ACK not sent, its producer is gone: {}", e.getMessage());
        }
    }

    /**
     * Reads the mailbox for ACKs unless a thread with a handler read it within the last millisecond or another
     * thread reads it now; returns the messages read. What it finds for a handler waits for the next poll.
     */
    int readAcksIfIdle() {
        if (applicationReadsNow() || !reading.tryLock()) {
            return 0;
        }
        try {
            int read = records.pollRecords(reader, 64);
            positions.read(reader);
            return read;
        } finally {
            unlockReading(APPLICATION_TELLS);
        }
    }

    /** Reads the ACKs waiting for an outcome poll, unless another thread reads now. */
    void readForOutcomePoll() {
        if (reading.tryLock()) {
            try {
                appPolls.acted(); // the application reads: the ACK thread stands aside
                records.pollRecords(reader, 64);
                positions.read(reader);
            } finally {
                unlockReading(0); // the poll tells, up to its limit
            }
        }
    }

    /**
     * One round of the ACK thread: it tells what waits, then takes one message (under the reading lock, unless the
     * application reads) and tells what that decided once it let go of the lock. One, not all that wait: a sender
     * that a told outcome wakes (blocked on a window of its own) takes the rest itself after its next post, on its
     * own thread, instead of being woken once per outcome. Returns the messages read,
     * {@link AckThread#APPLICATION_READS} when a thread with a handler read the mailbox within the last
     * {@value #IDLE_READ_NS} ns or ACKs wait gathered (it looks again then instead of sleeping), or
     * {@link AckThread#BUSY}.
     */
    int ackThreadRound() {
        outcomes.tellDecided(Integer.MAX_VALUE);
        gathered.sendIfOlderThan(IDLE_READ_NS); // a handler runs on (one that waits on its own window): its poll's
        boolean unsent = positions.publishIfOlderThan(IDLE_READ_NS) | gathered.any(); // ACKs and position go
        if (applicationReadsNow() || unsent) {
            return AckThread.APPLICATION_READS;
        }
        if (!reading.tryLock()) {
            return AckThread.BUSY;
        }
        try {
            positions.read(reader);
            return records.pollRecords(reader, 1);
        } finally {
            unlockReading(Integer.MAX_VALUE);
        }
    }

    /**
     * Reads every message waiting, unless another thread holds the mailbox for long (a transport settling). Before
     * the endpoint closes ({@code closing}): one pass over a full ring's worth at most, so that each ACK that came
     * decides its tensor, and the tensors read and not handed over are then refused to their producers.
     */
    void readWaiting(boolean closing) {
        try {
            if (reading.tryLock(100, TimeUnit.MILLISECONDS)) {
                try {
                    int read = records.pollRecords(reader, closing ? CLOSE_READS : 64);
                    while (!closing && read > 0) {
                        Thread.onSpinWait();
                        read = records.pollRecords(reader, 64);
                    }
                    positions.read(reader);
                } finally {
                    unlockReading(closing ? 0 : APPLICATION_TELLS); // close tells them all, with the CLOSED ones
                }
            }
            if (closing) {
                refuseParked();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IllegalStateException e) {
            LOG.debug("mailbox closed before it was read: {}", e.getMessage());
        }
    }

    // Lets go of the reading lock; the outermost holder then tells up to `tells` outcomes its reading decided.
    private void unlockReading(int tells) {
        reading.unlock();
        if (!reading.isHeldByCurrentThread()) {
            tellDecided(tells);
        }
    }

    /**
     * Tells up to {@code tells} decided outcomes on this thread (none while it holds the reading lock); wakes the
     * ACK thread for what it leaves, and a thread in {@code receive} for a record the ACK thread parked.
     */
    void tellDecided(int tells) {
        if (reading.isHeldByCurrentThread()) {
            return; // a reader tells once it lets go of the mailbox
        }
        if (tells > 0 && (outcomes.tellDecided(tells) == tells && outcomes.waitingForTeller()
            || outcomes.waitingForPoll())) {
            wait.wake(); // the ACK thread tells what is left; a thread in awaitOutcomes takes those told when polled
        }
        if (parked.any()) {
            wait.wake(); // a record the ACK thread took waits for a thread in receive
        }
    }

    // Whether a thread with a handler (or an outcome poll) read the mailbox within the last IDLE_READ_NS.
    private boolean applicationReadsNow() {
        return appPolls.within(IDLE_READ_NS);
    }

    /**
     * Takes each mailbox item: a record into the batch of the poll that reads, or parked for the next one when
     * the reader has none (a copy either way: the handlers run after the lock is let go); an ACK to the transport.
     */
    private final class Reader implements TensorChannel.RecordListener {
        RecordBatch batch;

        @Override
        public void descriptor(String from, MemorySegment record, long offset, int length) {
            if (batch != null) {
                batch.add(from, record, offset, length, 0);
            } else {
                parked.add(from, record, offset, length);
            }
        }

        @Override
        public void endOfMessage(long ringPosition) { // the message's last record moves the position once handled
            if (batch != null) {
                batch.endsMessage(ringPosition);
            } else {
                parked.endsMessage(ringPosition);
            }
        }

        @Override
        public void ack(String from, long msb, long lsb) {
            transport.records().ack(from, msb, lsb);
        }

        @Override
        public void refused(String from, long msb, long lsb) {
            outcomes.refused(msb, lsb, from, Delivery.Failure.REFUSED, "consumer " + from + " refused it: its slot was"
                + " reused before it was read (counted in that consumer's staleReads), its descriptor failed a check"
                + " there (counted in its mailbox's badMessages), or it closed before handing it over");
            transport.records().refused(from, msb, lsb);
        }
    }
}
