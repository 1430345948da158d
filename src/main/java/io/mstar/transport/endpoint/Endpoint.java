package io.mstar.transport.endpoint;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.acks.TensorFates;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.PeerRejectedException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.exceptions.StaleTensorException;
import io.mstar.transport.remote.RemoteLink;
import io.mstar.transport.remote.RoutedMailbox;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * The {@link TensorEndpoint}: a transport and a mailbox, the reading lock over the mailbox (see the
 * interface for who reads when) with the ACK thread, the flyweight a handler sees ({@link Incoming}), and
 * the {@link Outcomes} of what it sends.
 *
 * <p>One class on purpose: what it does shares one lock, the one that decides who reads the mailbox now (a
 * handler's poll, a sender after a small tensor, an outcome poll, the ACK thread), with the records parked for
 * the next handler and the flyweight; split, each part would take that lock and those fields from outside.
 */
final class Endpoint implements TensorEndpoint {
    private static final Logger LOG = LoggerFactory.getLogger(TensorEndpoint.class);
    /** How long the application may leave the mailbox unread before the ACK thread reads it. */
    static final long IDLE_READ_NS = 1_000_000;
    /** Tensors smaller than this have their sender read the ACKs waiting after it posts them. */
    static final long SENDER_READS_ACKS_BELOW = 64 << 10;

    private final Deployment deployment;
    private final TensorTransport transport;
    private final TensorChannel channel;
    private final TensorChannel.Records records;
    private final Outcomes outcomes;
    private final ReentrantLock reading = new ReentrantLock();
    private final ArrayDeque<Parked> parked = new ArrayDeque<>(); // guarded by reading
    private final Incoming incoming = new Incoming(this); // guarded by reading
    private final Reader reader = new Reader(); // guarded by reading
    // A thread that waits for the mailbox (receive, awaitOutcomes, the ACK thread) spins a moment, then sleeps
    // on the mailbox's futex until a sender's write wakes it (MessageWait). Parks slept 50 us or more past their
    // time (the timer's slack), and yields handed the core to a busy neighbour for its whole time slice.
    private final MessageWait wait;
    private volatile boolean anyParked; // whether parked holds records: a thread in receive need not sleep
    private final BooleanSupplier recordsParked = () -> anyParked; // made once: a wait allocates nothing
    private final BooleanSupplier outcomesDecided;
    private final ThreadLocal<MemorySegment> recordBuffers =
        ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]));
    // How many times a thread with a handler polled, and when another thread last saw that count move: the
    // application's poll reads no clock, and the ACK thread reads none while the application never polls.
    private volatile long appPolls;
    private volatile long seenAppPolls;
    private volatile long seenAppPollsAt;
    private volatile boolean sending;
    private volatile boolean closed;
    private AckThread ackThread; // guarded by this

    Endpoint(Deployment deployment, TensorTransport transport, TensorChannel channel, DeliveryListener listener) {
        this.deployment = deployment;
        this.transport = transport;
        this.channel = channel;
        this.records = channel.records();
        this.outcomes = new Outcomes(listener, deployment.config());
        this.outcomesDecided = outcomes::anyDecided;
        this.wait = MessageWait.of(channel);
        if (transport instanceof ArenaTransport arena) {
            arena.publishBeside("mailbox", () -> mailbox().stats());
            if (channel instanceof RoutedMailbox routed) {
                arena.publishBeside("remote", routed::remoteStats);
            }
        }
        if (transport instanceof TensorFates.Source source) {
            source.reportFatesTo(new TensorFates() {
                @Override
                public void freed(long uuidMsb, long uuidLsb, Fate fate, String consumer) {
                    outcomes.freed(uuidMsb, uuidLsb, fate, consumer);
                    tellDecidedUnlessReading(); // a reader tells once it lets go of the mailbox
                }

                @Override
                public void settle() {
                    readAllAcks();
                }
            });
        }
        if (channel instanceof RoutedMailbox routed) {
            routed.onRefused(new RemoteLink.RefusalListener() {
                @Override
                public void refused(String consumer, long msb, long lsb, String why) { // reported and freed at once
                    outcomes.refused(msb, lsb, Delivery.Failure.REFUSED, why);
                    transport.records().refused(consumer, msb, lsb); // decides it (freed)
                }

                @Override
                public void unreachable(String consumer, long msb, long lsb, PeerUnavailableException why) {
                    refuse(msb, lsb, why); // as a send that waited for the connection itself
                }

                @Override
                public void timedOut(String consumer, long msb, long lsb, boolean bytesLeft, String why) {
                    // the reason only: the tensor is decided as the transport frees it, as a gone consumer's
                    outcomes.refused(msb, lsb, bytesLeft ? Delivery.Failure.IN_DOUBT : Delivery.Failure.REMOTE_TIMEOUT,
                        why);
                }
            });
        }
    }

    @Override
    public Deployment deployment() {
        return deployment;
    }

    @Override
    public TensorTransport transport() {
        return transport;
    }

    @Override
    public TensorChannel channel() {
        return channel;
    }

    @Override
    public boolean awaitPeer(String entity, Duration timeout) throws InterruptedException {
        return channel.awaitPeer(entity, timeout);
    }

    @Override
    public void prepareToSend() {
        startSending();
        if (transport instanceof ArenaTransport arena) {
            arena.prepareToSend();
        }
    }

    @Override
    public Delivery send(String to, String requestId, Tensor... tensors) {
        return send(List.of(to), false, requestId, tensors);
    }

    @Override
    public Delivery send(List<String> to, String requestId, Tensor... tensors) {
        return send(to, true, requestId, tensors);
    }

    private Delivery send(List<String> to, boolean fanOut, String requestId, Tensor[] tensors) {
        startSending();
        List<Tensor> batch = List.of(tensors);
        List<TensorDescriptor> descriptors = fanOut ? transport.send(requestId, batch, to)
            : transport.send(requestId, batch);
        DeliveryHandle delivery = new DeliveryHandle(this, requestId, descriptors.size());
        String consumer = fanOut ? null : to.getFirst();
        for (TensorDescriptor d : descriptors) { // before the descriptors go: their ACKs may come back at once
            outcomes.track(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(), requestId, delivery,
                consumer);
        }
        try {
            channel.sendDescriptors(to, descriptors);
        } catch (PeerUnavailableException e) {
            // The others have them; each consumer that never got them gives up its share now (no incarnation has it).
            refuseAll(e, descriptors);
            for (Throwable more : e.getSuppressed()) {
                if (more instanceof PeerUnavailableException other) {
                    refuseAll(other, descriptors);
                }
            }
        }
        return delivery;
    }

    @Override
    public long post(String to, String requestId, Tensor tensor) {
        startSending();
        MemorySegment record = recordBuffers.get();
        int length = transport.records().sendInto(requestId, tensor, record, 0);
        return sendRecord(to, requestId, record, length, null);
    }

    @Override
    public long post(String to, String requestId, DType dtype, long[] shape, TensorRecords.Writer writer) {
        startSending();
        MemorySegment record = recordBuffers.get();
        int length = transport.records().sendWritten(requestId, dtype, shape, writer, record, 0);
        return sendRecord(to, requestId, record, length, null);
    }

    @Override
    public long repost(String to, String requestId, Tensor tensor, long inDoubtMsb, long inDoubtLsb) {
        TensorClaim claim = claim(requestId, tensor.dtype(), tensor.shape());
        boolean filled = false;
        try {
            MemorySegment.copy(tensor.data(), 0, claim.memory(), 0, tensor.nbytes());
            filled = true;
        } finally {
            if (!filled) {
                claim.close();
            }
        }
        if (channel instanceof RoutedMailbox routed) {
            routed.sendsAgain(claim.uuidMsb(), claim.uuidLsb(), inDoubtMsb, inDoubtLsb);
        }
        return post(to, claim);
    }

    @Override
    public TensorClaim claim(String requestId, DType dtype, long... shape) {
        startSending();
        return transport.claim(requestId, dtype, shape);
    }

    @Override
    public long post(String to, TensorClaim claim) {
        return publishAndSend(to, claim, null);
    }

    @Override
    public Delivery send(String to, TensorClaim claim) {
        DeliveryHandle delivery = new DeliveryHandle(this, claim.requestId(), 1);
        publishAndSend(to, claim, delivery);
        return delivery;
    }

    private long publishAndSend(String to, TensorClaim claim, DeliveryHandle delivery) {
        MemorySegment record = recordBuffers.get();
        return sendRecord(to, claim.requestId(), record, claim.publish(record, 0), delivery);
    }

    // Sends a tensor's descriptor record; returns the low half of its uuid.
    private long sendRecord(String to, String requestId, MemorySegment record, int length, DeliveryHandle delivery) {
        long msb = DescriptorCodec.uuidMsb(record, 0);
        long lsb = DescriptorCodec.uuidLsb(record, 0);
        if (delivery != null || outcomes.tellsEveryTensor()) {
            outcomes.track(msb, lsb, requestId, delivery, to);
        }
        try {
            records.sendDescriptorRecord(to, record, 0, length);
        } catch (PeerUnavailableException e) {
            refuse(msb, lsb, e);
        }
        if (DescriptorCodec.nbytes(record, 0) < SENDER_READS_ACKS_BELOW && !reading.isHeldByCurrentThread()) {
            // After a small tensor the sender takes the ACKs already waiting (unless the application polls):
            // handing each to the ACK thread costs as much as applying it. After a large one it does not: a
            // sender busy filling leaves its ACKs to the ACK thread, which then stays awake for the moment the
            // sender waits on them (measured: 64 KiB and up were slower with the sender reading).
            readAcksIfIdle();
        }
        return lsb;
    }

    private void refuseAll(PeerUnavailableException e, List<TensorDescriptor> descriptors) {
        for (TensorDescriptor d : descriptors) {
            refuse(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(), e);
        }
    }

    // A tensor that never reached its consumer: failed, then freed (its ACK finds it decided).
    private void refuse(long msb, long lsb, PeerUnavailableException e) {
        if (e instanceof PeerRejectedException) {
            outcomes.refused(msb, lsb, Delivery.Failure.REJECTED, e.getMessage());
        } else {
            outcomes.refused(msb, lsb, e.entity(), e.getMessage());
        }
        transport.records().refused(e.entity(), msb, lsb);
    }

    @Override
    public int pollOutcomes(int limit) {
        if (reading.tryLock()) {
            try {
                appPolls = appPolls + 1; // the application reads: the ACK thread stands aside
                records.pollRecords(reader, 64);
            } finally {
                unlockReading();
            }
        }
        return outcomes.poll(limit);
    }

    @Override
    public int awaitOutcomes(int limit, Duration timeout) {
        int told = pollOutcomes(limit);
        if (told > 0) {
            return told; // no waiting, no allocation
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        long left;
        while (told == 0 && (left = deadline - System.nanoTime()) > 0) {
            wait.awaitMessage(left, outcomesDecided, true); // an ACK for this thread to read, or outcomes another decided
            told = pollOutcomes(limit);
        }
        return told;
    }

    @Override
    public int poll(TensorHandler handler, int limit) {
        reading.lock();
        try {
            if (incoming.inHandler()) {
                throw new IllegalStateException("poll or receive from a handler: return from the handler instead");
            }
            appPolls = appPolls + 1; // under the reading lock: one writer at a time
            int read = 0;
            while (read < limit && !parked.isEmpty()) {
                Parked p = parked.poll();
                anyParked = !parked.isEmpty();
                read++;
                dispatch(p.from(), MemorySegment.ofArray(p.record()), 0, p.record().length, handler);
            }
            if (read < limit) {
                reader.handler = handler;
                try {
                    read += records.pollRecords(reader, limit - read);
                } finally {
                    reader.handler = null;
                }
            }
            return read;
        } finally {
            unlockReading();
        }
    }

    @Override
    public int receive(TensorHandler handler, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            int read = poll(handler, 64);
            long left = deadline - System.nanoTime();
            if (read > 0 || left <= 0) {
                return read;
            }
            wait.awaitMessage(left, recordsParked, true); // a message, or a record the ACK thread took and parked
        }
    }

    // Called with the reading lock held.
    private void dispatch(String from, MemorySegment record, long at, int length, TensorHandler handler) {
        boolean kept = false;
        boolean stale = false;
        try {
            kept = incoming.deliver(from, record, at, length, handler, transport);
        } catch (StaleTensorException e) {
            stale = true; // counted and logged where the stamp was read; the producer hears of it below
        } finally {
            if (!kept && DescriptorCodec.recordLength(record, at, length) == length) {
                // Each at once: gathering a poll's ACKs into one message made producers wait (docs/benchmarks.md).
                ack(from, DescriptorCodec.uuidMsb(record, at), DescriptorCodec.uuidLsb(record, at), stale);
            }
        }
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
        boolean nested = reading.isHeldByCurrentThread(); // a Delivery awaited in a handler
        if (!nested && (applicationReadsNow() || !reading.tryLock())) {
            return 0;
        }
        try {
            return records.pollRecords(reader, 64);
        } finally {
            if (!nested) {
                unlockReading();
            }
        }
    }

    /**
     * One round of the ACK thread: it takes one message (under the reading lock, unless the application reads)
     * and tells what it decided once it let go of the lock. One, not all that wait: a sender that a told outcome
     * wakes (blocked on a window of its own) takes the rest itself after its next post, on its own thread,
     * instead of being woken once per outcome; measured beside a busy neighbour, that wake per outcome cost two
     * context switches per tensor. Returns the messages read, {@link AckThread#APPLICATION_READS} when a thread
     * with a handler read the mailbox within the last {@value #IDLE_READ_NS} ns, or {@link AckThread#BUSY}.
     */
    private int ackThreadRound() {
        if (applicationReadsNow()) {
            return AckThread.APPLICATION_READS;
        }
        if (!reading.tryLock()) {
            return AckThread.BUSY;
        }
        try {
            return records.pollRecords(reader, 1);
        } finally {
            unlockReading();
        }
    }

    // Lets go of the reading lock; the outermost holder then tells what was decided while it read.
    private void unlockReading() {
        reading.unlock();
        tellDecidedUnlessReading();
    }

    private void tellDecidedUnlessReading() {
        if (reading.isHeldByCurrentThread()) {
            return;
        }
        if (outcomes.tellDecided() == 0 && outcomes.anyDecided()) {
            wait.wake(); // told when polled: a thread in awaitOutcomes takes them
        }
        if (recordsParked.getAsBoolean()) {
            wait.wake(); // a record the ACK thread took waits for a thread in receive
        }
    }

    // Whether a thread with a handler polled within the last IDLE_READ_NS. Callers race on the two fields
    // harmlessly: a wrong answer only moves one read of the mailbox by a millisecond.
    private boolean applicationReadsNow() {
        long polls = appPolls;
        if (polls == 0) {
            return false;
        }
        if (polls != seenAppPolls) {
            seenAppPolls = polls;
            seenAppPollsAt = System.nanoTime();
            return true;
        }
        return System.nanoTime() - seenAppPollsAt <= IDLE_READ_NS;
    }

    // Reads every message waiting, unless a thread of the application holds the mailbox for long.
    private void readAllAcks() {
        try {
            if (reading.tryLock(100, TimeUnit.MILLISECONDS)) {
                try {
                    while (records.pollRecords(reader, 64) > 0) {
                        Thread.onSpinWait();
                    }
                } finally {
                    unlockReading();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IllegalStateException e) {
            LOG.debug("mailbox closed while settling: {}", e.getMessage());
        }
    }

    /**
     * Takes each mailbox item: a record to the handler of the thread that reads, or kept for the next one
     * when it has none; an ACK to the transport.
     */
    private final class Reader implements TensorChannel.RecordListener {
        TensorHandler handler;

        @Override
        public void descriptor(String from, MemorySegment record, long offset, int length) {
            if (handler == null) {
                parked.add(new Parked(from, record.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE)));
                anyParked = true;
            } else {
                TensorHandler h = handler;
                handler = null; // a nested read (a Delivery awaited in the handler) keeps what it reads
                try {
                    dispatch(from, record, offset, length, h);
                } finally {
                    handler = h;
                }
            }
        }

        @Override
        public void ack(String from, long msb, long lsb) {
            transport.records().ack(from, msb, lsb);
        }

        @Override
        public void refused(String from, long msb, long lsb) {
            outcomes.refused(msb, lsb, Delivery.Failure.REFUSED, "consumer " + from + " refused it: its slot was"
                + " reused before it was read (counted in that consumer's staleReads)");
            transport.records().refused(from, msb, lsb);
        }
    }

    private record Parked(String from, byte[] record) {
    }

    private void startSending() {
        if (closed) {
            throw new IllegalStateException("endpoint is closed: entity=" + deployment.entity());
        }
        if (!sending) {
            synchronized (this) {
                if (!sending && !closed) {
                    sending = true;
                    ackThread = new AckThread(deployment.entity(), this::ackThreadRound, wait);
                }
            }
        }
    }

    @Override
    public void close() {
        AckThread thread;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            thread = ackThread;
        }
        if (thread != null) {
            thread.stop();
        }
        try {
            channel.close();
        } finally {
            transport.close();
            outcomes.closed();
        }
    }

    @Override
    public Stats stats() {
        return new Stats(deployment.entity(), transport.statsSummary(), mailbox().stats(), remoteStats());
    }

    private ShmMailbox mailbox() {
        return channel instanceof RoutedMailbox routed ? routed.local() : (ShmMailbox) channel;
    }

    @Override
    public Optional<RemoteStats> remoteStats() {
        return channel instanceof RoutedMailbox routed ? Optional.of(routed.remoteStats()) : Optional.empty();
    }

    @Override
    public String toString() {
        return "TensorEndpoint[" + deployment + ", " + transport.getClass().getSimpleName() + "]";
    }
}
