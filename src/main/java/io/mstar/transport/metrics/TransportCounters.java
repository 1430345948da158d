package io.mstar.transport.metrics;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.TransportStats;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The counters of one transport, each counted where its event happens and read together into a
 * {@link TransportStats} snapshot. Thread-safe; counting allocates nothing.
 */
public final class TransportCounters {
    private static final Logger LOG = LoggerFactory.getLogger(TransportCounters.class);
    private final AtomicLong tensorsSent = new AtomicLong();
    private final AtomicLong bytesSent = new AtomicLong();
    private final AtomicLong spills = new AtomicLong();
    private final AtomicLong spillBytes = new AtomicLong();
    private final AtomicLong waits = new AtomicLong();
    private final AtomicLong waitNs = new AtomicLong();
    private final AtomicLong acks = new AtomicLong();
    private final AtomicLong refusals = new AtomicLong();
    private final AtomicLong unknownAcks = new AtomicLong();
    private final AtomicLong ignoredAcks = new AtomicLong();
    private final AtomicLong ttlReclaims = new AtomicLong();
    private final AtomicLong deadConsumerReclaims = new AtomicLong();
    private final AtomicLong tensorsReceived = new AtomicLong();
    private final AtomicLong openClaims = new AtomicLong();
    private final AtomicLong claimsAbandoned = new AtomicLong();
    private final AtomicLong staleReads = new AtomicLong();
    private final LatencyHistogram sendToAck = new LatencyHistogram();
    private final LatencyHistogram receiveToRelease = new LatencyHistogram();

    /** A tensor was sent, into the arena or a file of its own. */
    public void sent(long nbytes) {
        tensorsSent.incrementAndGet();
        bytesSent.addAndGet(nbytes);
    }

    /** A tensor was sent to a spill file because the arena was full (also counted as sent). */
    public void spilled(long nbytes) {
        spills.incrementAndGet();
        spillBytes.addAndGet(nbytes);
        sent(nbytes);
    }

    /** A send waited for ACKs on a full arena. */
    public void waited(long ns) {
        waits.incrementAndGet();
        waitNs.addAndGet(ns);
    }

    /** What {@link #acked} is told of an ACK that named no tensor in flight. */
    public static final long NOT_IN_FLIGHT = Long.MIN_VALUE;

    /**
     * An ACK freed a tensor sent at {@code sentAtNs} ({@link System#nanoTime}), or named none in flight
     * ({@link #NOT_IN_FLIGHT}).
     */
    public void acked(long sentAtNs) {
        freed(sentAtNs, false);
    }

    /**
     * As {@link #acked}; {@code refused}: the tensor was freed because its consumer refused it or never got it,
     * counted in {@code refusals} and not timed as an ACK.
     */
    public void freed(long sentAtNs, boolean refused) {
        if (sentAtNs == NOT_IN_FLIGHT) {
            unknownAcks.incrementAndGet();
        } else if (refused) {
            refusals.incrementAndGet();
        } else {
            acks.incrementAndGet();
            sendToAck.record(System.nanoTime() - sentAtNs);
        }
    }

    /** An ACK of a fan-out tensor did not count. */
    public void ignoredAck() {
        ignoredAcks.incrementAndGet();
    }

    public void ttlReclaimed(int tensors) {
        ttlReclaims.addAndGet(tensors);
    }

    public void deadConsumerReclaimed(int tensors) {
        deadConsumerReclaims.addAndGet(tensors);
    }

    /** A claim was made; {@link #claimEnded()} when it is published or aborted. */
    public void claimOpened() {
        openClaims.incrementAndGet();
    }

    public void claimEnded() {
        openClaims.decrementAndGet();
    }

    /**
     * At close: the claims still open are abandoned (their room is freed with the transport), counted, and
     * reported in one warning.
     */
    public void abandonOpenClaims(String entity) {
        long open = openClaims.getAndSet(0);
        if (open > 0) {
            claimsAbandoned.addAndGet(open);
            LOG.warn("transport closed with claims neither published nor aborted: entity={}, claims={} (freed; counted"
                + " in claimsAbandoned)", entity, open);
        }
    }

    /** A tensor was opened or copied by this process as a consumer. */
    public void received() {
        tensorsReceived.incrementAndGet();
    }

    /** A tensor was refused because its slot was reused under the read; returns how many so far. */
    public long staleRead() {
        return staleReads.incrementAndGet();
    }

    /** A number that changes whenever a tensor is sent, spilled, ACKed, refused or received: a cheap "anything new?". */
    public long activity() {
        return tensorsSent.get() + spills.get() + acks.get() + refusals.get() + tensorsReceived.get();
    }

    /** Where the view of a received tensor records the time from its receive to its close. */
    public LatencyHistogram receiveToRelease() {
        return receiveToRelease;
    }

    /**
     * The snapshot, with what the counters do not hold.
     *
     * @param arena null for the file transport
     */
    public TransportStats snapshot(String transport, ArenaStats arena, long inFlight, long oldestInFlightNs,
                                   int partiallyAcked, int mappedPeerSegments, long pinnedBytes, int pinnedSegments,
                                   String cuda) {
        return new TransportStats(transport, arena, tensorsSent.get(), bytesSent.get(), inFlight, oldestInFlightNs,
            spills.get(),
            spillBytes.get(), waits.get(), waitNs.get(), acks.get(), refusals.get(), unknownAcks.get(), ignoredAcks.get(),
            partiallyAcked, ttlReclaims.get(), deadConsumerReclaims.get(), claimsAbandoned.get(), tensorsReceived.get(),
            staleReads.get(), mappedPeerSegments, pinnedBytes, pinnedSegments, cuda, sendToAck.snapshot(), receiveToRelease.snapshot());
    }
}
