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
import io.mstar.transport.remote.RemoteLink;
import io.mstar.transport.remote.RoutedMailbox;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.BooleanSupplier;

/**
 * The {@link TensorEndpoint}: a facade over a transport and a mailbox. Who reads the mailbox, and how handlers
 * get their tensors, is {@link MailboxReading}'s; what became of each tensor sent, and telling it, is
 * {@link Outcomes}'s; this class sends, and decides what a send that fails or throws leaves behind: exactly one
 * outcome, or an exception and none.
 */
final class Endpoint implements TensorEndpoint {
    private static final Logger LOG = LoggerFactory.getLogger(TensorEndpoint.class);
    /** Tensors smaller than this have their sender read the ACKs waiting after it posts them. */
    static final long SENDER_READS_ACKS_BELOW = 64 << 10;

    private final Deployment deployment;
    private final TensorTransport transport;
    private final TensorChannel channel;
    private final TensorChannel.Records records;
    private final Outcomes outcomes;
    private final MailboxReading reading;
    // A thread that waits for the mailbox (receive, awaitOutcomes, the ACK thread) spins a moment, then sleeps
    // on the mailbox's futex until a sender's write wakes it (MessageWait). Parks slept 50 us or more past their
    // time (the timer's slack), and yields handed the core to a busy neighbour for its whole time slice.
    private final MessageWait wait;
    private final BooleanSupplier outcomesToPoll;
    private final ThreadLocal<MemorySegment> recordBuffers =
        ThreadLocal.withInitial(() -> MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]));
    private volatile boolean sending;
    private volatile boolean closed;
    private AckThread ackThread; // guarded by this

    Endpoint(Deployment deployment, TensorTransport transport, TensorChannel channel, DeliveryListener listener) {
        this.deployment = deployment;
        this.transport = transport;
        this.channel = channel;
        this.records = channel.records();
        this.outcomes = new Outcomes(listener, deployment.config());
        this.wait = MessageWait.of(channel);
        this.reading = new MailboxReading(records, transport, outcomes, wait, new Incoming(this),
            channel instanceof RoutedMailbox routed ? routed.local() : channel instanceof ShmMailbox m ? m : null);
        this.outcomesToPoll = () -> outcomes.waitingForPoll() || reading.positions().due();
        if (transport instanceof ArenaTransport arena) {
            arena.publishBeside("mailbox", () -> mailbox().stats());
            arena.explainStallsWith(this::whatHoldsOutcomes);
            if (channel instanceof RoutedMailbox routed) {
                arena.publishBeside("remote", routed::remoteStats);
            }
        }
        if (transport instanceof TensorFates.Source source) {
            source.reportFatesTo(new TensorFates() {
                @Override
                public void freed(long uuidMsb, long uuidLsb, Fate fate, String consumer) {
                    outcomes.freed(uuidMsb, uuidLsb, fate, consumer);
                    reading.tellDecided(MailboxReading.APPLICATION_TELLS); // a reader tells once it lets go
                }

                @Override
                public void settle() {
                    reading.readWaiting(false);
                }
            });
        }
        if (channel instanceof RoutedMailbox routed) {
            routed.onRefused(new RemoteLink.RefusalListener() {
                @Override
                public void refused(String consumer, long msb, long lsb, String why) { // reported and freed at once
                    outcomes.refused(msb, lsb, consumer, Delivery.Failure.REFUSED, why);
                    transport.records().refused(consumer, msb, lsb); // decides it (freed)
                }

                @Override
                public void unreachable(String consumer, long msb, long lsb, PeerUnavailableException why) {
                    refuse(msb, lsb, why); // as a send that waited for the connection itself
                }

                @Override
                public void timedOut(String consumer, long msb, long lsb, boolean bytesLeft, String why) {
                    // the reason only: the tensor is decided as the transport frees it, as a gone consumer's
                    outcomes.refused(msb, lsb, consumer, bytesLeft ? Delivery.Failure.IN_DOUBT : Delivery.Failure.REMOTE_TIMEOUT,
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
        int tracked = 0;
        try {
            for (TensorDescriptor d : descriptors) { // before the descriptors go: their ACKs may come back at once
                outcomes.track(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(), requestId,
                    delivery, consumer, fanOut ? to : null);
                tracked++;
            }
            channel.sendDescriptors(to, descriptors);
        } catch (PeerUnavailableException e) {
            // The others have them; each consumer that never got them gives up its share now (no incarnation has it).
            refuseAll(e, descriptors);
            for (Throwable more : e.getSuppressed()) {
                if (more instanceof PeerUnavailableException other) {
                    refuseAll(other, descriptors);
                }
            }
        } catch (RuntimeException | Error e) {
            long[] uuids = new long[2 * tracked];
            for (int k = 0; k < tracked; k++) {
                uuids[2 * k] = descriptors.get(k).uuid().getMostSignificantBits();
                uuids[2 * k + 1] = descriptors.get(k).uuid().getLeastSignificantBits();
            }
            boolean untracked = outcomes.untrackAll(uuids); // all or none: one outcome each, or the exception alone
            for (TensorDescriptor d : descriptors) {
                for (String share : to) { // each share of a fan-out's; those still tracked are told this failure
                    long msb = d.uuid().getMostSignificantBits();
                    long lsb = d.uuid().getLeastSignificantBits();
                    if (!untracked) {
                        outcomes.refused(msb, lsb, share, "not sent: " + e);
                    }
                    freeUnsent(share, msb, lsb, e);
                }
            }
            if (untracked) {
                throw e;
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
        if (outcomes.tellingOnThisThread() && transport instanceof ArenaTransport arena) {
            // A listener inside a post: this thread's last claim object may be that post's, still in its holder's hands.
            return arena.claimUnshared(requestId, dtype, shape);
        }
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

    // Sends a tensor's descriptor record; returns the low half of its uuid. A send that throws leaves nothing
    // tracked and the tensor freed, unless it was decided meanwhile (close, a death): then its outcome is the one.
    private long sendRecord(String to, String requestId, MemorySegment record, int length, DeliveryHandle delivery) {
        long msb = DescriptorCodec.uuidMsb(record, 0);
        long lsb = DescriptorCodec.uuidLsb(record, 0);
        boolean tracked = false;
        try {
            if (delivery != null || outcomes.tellsEveryTensor()) {
                outcomes.track(msb, lsb, requestId, delivery, to, null);
                tracked = true;
            }
            if (reading.positions().active()) { // no ACK comes back: the consumer's handled position says it
                records.postRecord(to, record, 0, length);
            } else {
                records.sendDescriptorRecord(to, record, 0, length);
            }
        } catch (PeerUnavailableException e) {
            refuse(msb, lsb, e);
        } catch (RuntimeException | Error e) {
            if (!tracked || outcomes.untrack(msb, lsb)) {
                freeUnsent(to, msb, lsb, e);
                throw e;
            }
        }
        if (DescriptorCodec.nbytes(record, 0) < SENDER_READS_ACKS_BELOW) {
            // After a small tensor the sender takes the ACKs and positions already there (unless the application
            // polls): handing each to the ACK thread costs as much as applying it. A sender busy filling large ones
            // leaves them to the ACK thread, awake then for the moment it waits (measured: 64 KiB and up were slower).
            reading.readAcksIfIdle();
        }
        return lsb;
    }

    // Frees a tensor whose send threw; its fate finds nothing tracked, so nothing is told.
    private void freeUnsent(String to, long msb, long lsb, Throwable thrown) {
        try {
            transport.records().refused(to, msb, lsb);
        } catch (RuntimeException e) {
            thrown.addSuppressed(e); // the transport closed under the send: close freed it
        }
    }

    private void refuseAll(PeerUnavailableException e, List<TensorDescriptor> descriptors) {
        for (TensorDescriptor d : descriptors) {
            refuse(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(), e);
        }
    }

    // A tensor that never reached its consumer: failed, then freed (its ACK finds it decided).
    private void refuse(long msb, long lsb, PeerUnavailableException e) {
        if (e instanceof PeerRejectedException) {
            outcomes.refused(msb, lsb, e.entity(), Delivery.Failure.REJECTED, e.getMessage());
        } else {
            outcomes.refused(msb, lsb, e.entity(), e.getMessage());
        }
        transport.records().refused(e.entity(), msb, lsb);
    }

    @Override
    public int pollOutcomes(int limit) {
        if (!closed) {
            reading.readForOutcomePoll();
        }
        return outcomes.poll(limit);
    }

    @Override
    public int awaitOutcomes(int limit, Duration timeout) {
        int told = pollOutcomes(limit);
        if (told > 0 || closed) {
            return told; // no waiting, no allocation; after close, every outcome was decided
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        long left;
        while (told == 0 && !closed && (left = deadline - System.nanoTime()) > 0) {
            wait.awaitMessage(left, outcomesToPoll, true); // an ACK for this thread to read, or outcomes another decided
            told = pollOutcomes(limit);
        }
        return told;
    }

    @Override
    public int poll(TensorHandler handler, int limit) {
        return reading.poll(handler, limit);
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
            reading.awaitRecord(left); // a message, or a record the ACK thread took and parked
        }
    }

    /** ACKs a kept tensor, or refuses it when its slot was reused while it was kept. */
    void ack(String producer, long msb, long lsb, boolean refused) {
        reading.ack(producer, msb, lsb, refused);
    }

    /** Reads the ACKs waiting unless another thread reads them now: a thread that awaits a Delivery helps. */
    void readAcksIfIdle() {
        reading.readAcksIfIdle();
    }

    private void startSending() {
        if (closed) {
            throw new IllegalStateException("endpoint is closed: entity=" + deployment.entity());
        }
        if (!sending) {
            synchronized (this) {
                if (!sending && !closed) {
                    sending = true;
                    ackThread = new AckThread(deployment.entity(), reading::ackThreadRound, wait,
                        () -> outcomes.waitingForTeller() || reading.positions().due());
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
        try {
            reading.closingFromHandler(); // a handler that closes: its own tensor is handled
            reading.readWaiting(true); // an ACK that came decides its tensor, not CLOSED
        } catch (RuntimeException e) { // the mailbox closed first (a shutdown hook) or a peer's stayed full
            LOG.warn("closing {}: the ACKs owed and the ACKs waiting were not all taken: {}", deployment.entity(),
                e.toString());
        }
        if (thread != null) {
            thread.stop();
        }
        try {
            channel.close();
        } finally {
            try {
                transport.close();
            } finally {
                outcomes.closed(); // whatever the closes threw: every tensor still in flight is told CLOSED
            }
        }
    }

    // For the stall's WARN: what this process does that could hold a tensor's outcome, as it is now.
    private String whatHoldsOutcomes() {
        long unread = mailbox().stats().unreadAcks();
        String handler = reading.handlerNow();
        String teller = outcomes.tellerNow();
        return (unread == 0 ? "no ACK waits unread in this process's mailbox: the consumer has not handled the tensor"
            + " (slow, blocked or stopped)" : unread + " ACKs wait unread in this process's mailbox; "
            + (ackThreadRuns() ? "its ACK thread reads them" : "no thread of this endpoint reads them"))
            + (handler == null ? "" : "; " + handler)
            + (teller == null ? "" : "; " + teller + " (a listener that blocks holds every outcome after it)");
    }

    private synchronized boolean ackThreadRuns() {
        return ackThread != null && !closed;
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
