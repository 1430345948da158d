package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.acks.TensorFates;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * What became of each tensor one endpoint sent: one small state machine per tensor, whoever learns its fate
 * (an ACK read by the ACK thread, a sender, a polling thread; a liveness check; the TTL; the network's event
 * loop; close):
 * <pre>
 *   post ──track──▶ IN_FLIGHT ──fail──▶ IN_FLIGHT, failing (the first reason is kept)
 *     │                 │                      │
 *     │                 └────────freed─────────┴──▶ DECIDED ──take──▶ TOLD
 *     └── throws ◀──untrack── IN_FLIGHT (nothing told: the caller saw the exception)
 * </pre>
 * <ul>
 *   <li>IN_FLIGHT: an entry of {@link SentTensors}, keyed by uuid. Once {@link #closed} ran, nothing more is
 *       tracked: a post racing close throws instead.</li>
 *   <li>DECIDED: {@link #freed} takes the entry out of the table and appends its outcome to {@link #decided}
 *       in one critical section (the table's lock): a tensor is decided at most once, since it leaves the
 *       table as it is decided, and an ACK, a death or a timeout that comes later finds nothing. {@link #untrack}
 *       takes it out undecided, for a post that throws: the same lock decides which of the two came first.</li>
 *   <li>TOLD: its {@link DeliveryHandle}, if any, is told as it leaves the table (its waiter need not poll);
 *       the listener is told by {@link OutcomeQueue#drain}, one thread at a time, in a loop, never
 *       re-entrantly, in the order decided, outside every lock of the endpoint's.</li>
 * </ul>
 * The endpoint calls {@link #tellDecided} after every path that may decide, once it holds no lock of its own
 * (a listener may call the endpoint), so no outcome waits untold. Thread-safe.
 */
final class Outcomes {
    private static final Logger LOG = LoggerFactory.getLogger(TensorEndpoint.class);
    /**
     * Test-only seam: {@code -Dmstar.test.closeLeavesPolledUntold=true} leaves a listener told when polled untold at
     * close, as this class once did, so the usage campaign can show it finds posts never told.
     */
    static final boolean CLOSE_LEAVES_POLLED_UNTOLD = Boolean.getBoolean("mstar.test.closeLeavesPolledUntold");
    /** How long close waits for another thread's telling to end (a listener that blocks). */
    private static final long CLOSE_TELLS_NS = 5_000_000_000L;

    private final SentTensors sent = new SentTensors(); // IN_FLIGHT; guarded by itself
    private final OutcomeQueue decided; // DECIDED, in the order decided
    private final DeliveryListener listener; // null: outcomes only for Delivery handles
    private final boolean toldWhenPolled;
    private final TransportConfig config;
    private final OutcomeQueue.Teller teller = this::tell; // made once: telling allocates nothing
    private boolean closed; // guarded by sent

    Outcomes(DeliveryListener listener, TransportConfig config) {
        this(listener, config, new OutcomeQueue());
    }

    /** With a queue of the test's (the telling it replaced, for a model checker's negative control). */
    Outcomes(DeliveryListener listener, TransportConfig config, OutcomeQueue decided) {
        this.listener = listener;
        this.config = config;
        this.decided = decided;
        this.toldWhenPolled = listener != null && listener.toldWhenPolled();
    }

    /** Whether every tensor's outcome is told (to the listener), not only those with a handle. */
    boolean tellsEveryTensor() {
        return listener != null;
    }

    /**
     * IN_FLIGHT: a tensor about to be sent ({@code delivery} may be null, {@code consumer} too).
     *
     * @throws IllegalStateException when the endpoint closed: the caller frees the tensor and throws
     */
    void track(long msb, long lsb, String requestId, DeliveryHandle delivery, String consumer, List<String> fanOut) {
        synchronized (sent) {
            if (closed) {
                throw new IllegalStateException("endpoint is closed: requestId=" + requestId + " not sent");
            }
            sent.track(msb, lsb, requestId, delivery, consumer, fanOut);
        }
    }

    /**
     * Takes the tracked tensors ({@code uuids}: two longs each) out undecided, for a send of several that throws: all
     * of them, or none when one was decided already (then the caller has each told, and must not throw).
     */
    boolean untrackAll(long[] uuids) {
        synchronized (sent) {
            for (int k = 0; k < uuids.length; k += 2) {
                if (!sent.contains(uuids[k], uuids[k + 1])) {
                    return false;
                }
            }
            for (int k = 0; k < uuids.length; k += 2) {
                sent.remove(uuids[k], uuids[k + 1]);
            }
            return true;
        }
    }

    /**
     * Takes a tracked tensor out undecided, for a send that throws; returns false when it was decided already (by
     * close, or a death): then its one outcome is told, and the send must not throw.
     */
    boolean untrack(long msb, long lsb) {
        synchronized (sent) {
            return sent.remove(msb, lsb);
        }
    }

    /**
     * The tensor never reached {@code consumer}: a remote entity that took nothing within the timeout timed
     * out, a local one refused. Decided when the transport frees it.
     */
    void refused(long msb, long lsb, String consumer, String why) {
        refused(msb, lsb, consumer, consumer != null && config.remote().isRemote(consumer)
            ? Delivery.Failure.REMOTE_TIMEOUT : Delivery.Failure.REFUSED, why);
    }

    /** As {@link #refused(long, long, String, String)}, with the failure known: IN_FLIGHT, failing. */
    void refused(long msb, long lsb, String consumer, Delivery.Failure failure, String why) {
        synchronized (sent) {
            sent.fail(msb, lsb, failure, why, consumer == null ? null : entityOf(consumer));
        }
    }

    /**
     * DECIDED: what the transport says became of a tensor it freed (or, {@link TensorFates.Fate#SHARE_LOST}, of
     * one consumer's share of it). A tensor not in the table (not sent here with an outcome to tell, or decided
     * already) is left alone.
     */
    void freed(long msb, long lsb, TensorFates.Fate fate, String consumer) {
        DeliveryHandle delivery;
        Delivery.Failure failure;
        String detail;
        synchronized (sent) {
            if (fate == TensorFates.Fate.SHARE_LOST) {
                sent.fail(msb, lsb, failureOf(consumer), deathOf(consumer), consumer == null ? null : entityOf(consumer));
                return;
            }
            if (!sent.remove(msb, lsb)) {
                return;
            }
            delivery = sent.removedDelivery;
            failure = sent.removedFailure;
            detail = sent.removedDetail;
            String to = consumer != null ? consumer : sent.removedConsumer;
            if (failure == null && fate == TensorFates.Fate.CONSUMER_DIED) {
                failure = failureOf(to);
                detail = deathOf(to);
            } else if (failure == null && fate == TensorFates.Fate.EXPIRED) {
                failure = Delivery.Failure.EXPIRED;
                detail = "no ACK within " + TransportConfig.SLOT_TTL_S + "=" + config.slotTtl().toSeconds() + " s";
            } else if (failure != null && fate != TensorFates.Fate.EXPIRED && sent.removedPartly) {
                // Freed by the last share's ACK, or by the death of the last consumers that had not ACKed: the others
                // ACKed it, and a definite failure would have a retry handled twice there.
                failure = Delivery.Failure.PARTIAL;
                detail = "the other consumers of the fan-out ACKed it; " + detail;
            }
            if (listener != null) {
                decided.add(sent.removedRequestId, msb, lsb, failure, detail);
            }
        }
        if (delivery != null) { // a handle is told as its outcome is decided: its waiter need not poll
            if (failure == null) {
                delivery.tensorDelivered();
            } else {
                delivery.tensorFailed(failure, detail);
            }
        }
    }

    /**
     * TOLD: tells up to {@code limit} outcomes decided so far on the calling thread, which must hold no lock the
     * listener could need, unless the listener is told only when polled or another thread (or this one, further
     * up its stack: a listener that posts) tells now; returns how many.
     */
    int tellDecided(int limit) {
        return toldWhenPolled || listener == null ? 0 : decided.drain(teller, limit);
    }

    /** Whether outcomes wait for {@link #poll} (a listener told when polled). */
    boolean waitingForPoll() {
        return toldWhenPolled && decided.size() > 0;
    }

    /** Whether outcomes wait to be told by the ACK thread: decided, and no thread tells now. */
    boolean waitingForTeller() {
        return !toldWhenPolled && listener != null && decided.size() > 0 && !decided.anyTeller();
    }

    /** Whether the calling thread runs in the listener now. */
    boolean tellingOnThisThread() {
        return decided.tellingOnThisThread();
    }

    /** The thread that tells now and for how long, for the stall's WARN; null when none. */
    String tellerNow() {
        return decided.tellerNow();
    }

    /**
     * TOLD, for a listener told when polled: up to {@code limit} outcomes, on the calling thread.
     *
     * @throws IllegalStateException when the listener is told as outcomes are learned, not when polled
     */
    int poll(int limit) {
        if (!toldWhenPolled) {
            throw new IllegalStateException("this endpoint tells its outcomes as they are learned: to poll them, open"
                + " it with a DeliveryListener whose toldWhenPolled() returns true");
        }
        return decided.drain(teller, limit);
    }

    /** Tensors in flight whose outcome is still to be decided. */
    int inFlight() {
        synchronized (sent) {
            return sent.size();
        }
    }

    /**
     * The endpoint closed: every tensor still waited for fails with {@link Delivery.Failure#CLOSED}, told on this
     * thread whatever the listener (unless another thread tells now, whose loop then tells them; a listener that
     * closes returns to that loop).
     */
    void closed() {
        long[] uuids;
        synchronized (sent) {
            closed = true;
            uuids = sent.uuids();
            for (int k = 0; k < uuids.length; k += 2) {
                sent.fail(uuids[k], uuids[k + 1], Delivery.Failure.CLOSED, "the endpoint closed first", null);
            }
        }
        for (int k = 0; k < uuids.length; k += 2) {
            freed(uuids[k], uuids[k + 1], TensorFates.Fate.ACKED, null);
        }
        if (listener == null || (CLOSE_LEAVES_POLLED_UNTOLD && toldWhenPolled)) {
            return;
        }
        decided.closing(); // every loop from now on tells them all, a polled one too, and one of limited tells
        if (decided.tellingOnThisThread()) {
            return; // a listener that closes: the loop it returns to tells them, whatever that loop's limit
        }
        long deadline = System.nanoTime() + CLOSE_TELLS_NS;
        while (decided.size() > 0 && System.nanoTime() < deadline) {
            if (decided.drain(teller, Integer.MAX_VALUE) == 0) {
                LockSupport.parkNanos(100_000); // another thread tells now: its loop tells them
            }
        }
    }

    private Delivery.Failure failureOf(String consumer) {
        return consumer != null && config.remote().isRemote(entityOf(consumer))
            ? Delivery.Failure.REMOTE_TIMEOUT : Delivery.Failure.CONSUMER_DIED;
    }

    private String deathOf(String consumer) {
        return consumer == null ? "a consumer died before ACKing"
            : failureOf(consumer) == Delivery.Failure.REMOTE_TIMEOUT
            ? "consumer " + entityOf(consumer) + " on another node did not confirm it within " + RemoteConfig.TIMEOUT_S
            : "consumer " + entityOf(consumer) + " died before ACKing";
    }

    // A liveness key is entity@incarnation.
    private static String entityOf(String key) {
        int at = key.indexOf('@');
        return at < 0 ? key : key.substring(0, at);
    }

    // One outcome taken from the queue, told to the listener.
    private void tell(String requestId, long msb, long lsb, Delivery.Failure failure, String detail) {
        try {
            if (failure == null) {
                listener.delivered(requestId, msb, lsb);
            } else {
                listener.failed(requestId, msb, lsb, failure, detail);
            }
        } catch (Throwable e) { // as Netty tells a promise's listeners: an Error of the listener's stops no telling
            LOG.warn("the delivery listener threw (the outcome stands): requestId={}", requestId, e);
        }
    }
}
