package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.acks.TensorFates;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What became of each tensor one endpoint sent: the tensors someone waits for ({@link SentTensors}), the
 * failure each one met before it was freed, and telling the outcome to its {@link DeliveryHandle} and the
 * {@link DeliveryListener}. Thread-safe: the table is guarded by itself; outcomes are told outside it.
 */
final class Outcomes {
    private static final Logger LOG = LoggerFactory.getLogger(TensorEndpoint.class);

    private final SentTensors sent = new SentTensors(); // guarded by itself
    private final DeliveryListener listener; // null: outcomes only for Delivery handles
    private final OutcomeQueue polled; // non-null when the listener is told only when polled
    private final TransportConfig config;
    // What the ACK thread learned under the endpoint's reading lock, told by it once it let go of the lock.
    private final OutcomeQueue deferred = new OutcomeQueue();
    private volatile Thread defersTelling;
    private final OutcomeQueue.Teller toListener = this::tellListener; // made once: draining allocates nothing
    private final OutcomeQueue.Teller now = this::tellNow;

    Outcomes(DeliveryListener listener, TransportConfig config) {
        this.listener = listener;
        this.config = config;
        this.polled = listener != null && listener.toldWhenPolled() ? new OutcomeQueue() : null;
    }

    /**
     * From now on {@code thread} (the ACK thread) queues what it learns, to tell it in {@link #tellDeferred}
     * after it let go of the reading lock: the sending thread that a told outcome wakes (one blocked on a window
     * of its own) then finds the lock free and takes the ACKs that wait itself, instead of waking once per
     * outcome while the ACK thread, preempted in the listener, holds the lock.
     */
    void deferTellingOn(Thread thread) {
        this.defersTelling = thread;
    }

    /** Tells what {@link #deferTellingOn the ACK thread} learned; called by it, outside the reading lock. */
    void tellDeferred() {
        deferred.drain(now, Integer.MAX_VALUE);
    }

    /** Whether every tensor's outcome is told (to the listener), not only those with a handle. */
    boolean tellsEveryTensor() {
        return listener != null;
    }

    /** Waits for the outcome of a tensor about to be sent ({@code delivery} may be null, {@code consumer} too). */
    void track(long msb, long lsb, String requestId, DeliveryHandle delivery, String consumer) {
        synchronized (sent) {
            sent.track(msb, lsb, requestId, delivery, consumer);
        }
    }

    /**
     * The tensor never reached {@code consumer}: a remote entity that took nothing within the timeout timed
     * out, a local one refused. Decided when the transport frees it.
     */
    void refused(long msb, long lsb, String consumer, String why) {
        refused(msb, lsb, consumer != null && config.remote().isRemote(consumer)
            ? Delivery.Failure.REMOTE_TIMEOUT : Delivery.Failure.REFUSED, why);
    }

    /** As {@link #refused(long, long, String, String)}, with the failure known. */
    void refused(long msb, long lsb, Delivery.Failure failure, String why) {
        synchronized (sent) {
            sent.fail(msb, lsb, failure, why);
        }
    }

    /** What the transport says became of a tensor it freed (or of one consumer's share of it). */
    void freed(long msb, long lsb, TensorFates.Fate fate, String consumer) {
        String requestId;
        DeliveryHandle delivery;
        Delivery.Failure failure;
        String detail;
        synchronized (sent) {
            if (fate == TensorFates.Fate.SHARE_LOST) {
                sent.fail(msb, lsb, failureOf(consumer), deathOf(consumer));
                return;
            }
            if (!sent.remove(msb, lsb)) {
                return; // not sent by this endpoint, or nobody waits for it
            }
            requestId = sent.removedRequestId;
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
            }
        }
        tell(requestId, msb, lsb, delivery, failure, detail);
    }

    /**
     * Tells the listener up to {@code limit} outcomes that waited for a poll, on the calling thread.
     *
     * @throws IllegalStateException when the listener is told as outcomes are learned, not when polled
     */
    int poll(int limit) {
        if (polled == null) {
            throw new IllegalStateException("this endpoint tells its outcomes as they are learned: to poll them, open"
                + " it with a DeliveryListener whose toldWhenPolled() returns true");
        }
        return polled.drain(toListener, limit);
    }

    /** The endpoint closed: every tensor still waited for fails with {@link Delivery.Failure#CLOSED}. */
    void closed() {
        long[] uuids;
        synchronized (sent) {
            uuids = sent.uuids();
            for (int k = 0; k < uuids.length; k += 2) {
                sent.fail(uuids[k], uuids[k + 1], Delivery.Failure.CLOSED, "the endpoint closed first");
            }
        }
        for (int k = 0; k < uuids.length; k += 2) {
            freed(uuids[k], uuids[k + 1], TensorFates.Fate.ACKED, null);
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

    private void tell(String requestId, long msb, long lsb, DeliveryHandle delivery, Delivery.Failure failure,
                      String detail) {
        if (polled == null && Thread.currentThread() == defersTelling) {
            deferred.add(requestId, msb, lsb, delivery, failure, detail);
            return;
        }
        tellNow(requestId, msb, lsb, delivery, failure, detail);
    }

    private void tellNow(String requestId, long msb, long lsb, DeliveryHandle delivery, Delivery.Failure failure,
                         String detail) {
        if (delivery != null) {
            if (failure == null) {
                delivery.tensorDelivered();
            } else {
                delivery.tensorFailed(failure, detail);
            }
        }
        if (polled != null) {
            polled.add(requestId, msb, lsb, null, failure, detail);
        } else if (listener != null) {
            try {
                tellListener(requestId, msb, lsb, null, failure, detail);
            } catch (RuntimeException e) {
                LOG.warn("the delivery listener threw (the outcome stands): requestId={}", requestId, e);
            }
        }
    }

    // The listener's part of an outcome (for one taken from the polled queue, the handle was told when learned).
    private void tellListener(String requestId, long msb, long lsb, DeliveryHandle delivery, Delivery.Failure failure,
                              String detail) {
        if (failure == null) {
            listener.delivered(requestId, msb, lsb);
        } else {
            listener.failed(requestId, msb, lsb, failure, detail);
        }
    }
}
