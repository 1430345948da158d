package io.mstar.transport;

import java.time.Duration;

/**
 * What became of the tensors of one {@link TensorEndpoint#send send}: pending until every consumer has
 * ACKed each of them (then {@link Status#DELIVERED}), or failed at the first tensor that cannot be (then
 * {@link Status#FAILED}, with the {@link Failure} and a detail naming the consumer or the cause).
 * Thread-safe.
 */
public interface Delivery {
    /** Where a delivery stands. */
    enum Status { PENDING, DELIVERED, FAILED }

    /**
     * Why a tensor was not delivered. Every failure but {@link #IN_DOUBT} and {@link #PARTIAL} is definite: the
     * consumer's handler never saw the tensor and never will ({@link #isDefinite}); send it again if it matters.
     */
    enum Failure {
        /** A consumer on this node died before ACKing it (its space is freed). */
        CONSUMER_DIED,
        /**
         * None of it reached a consumer on another node within {@code MSTAR_REMOTE_TIMEOUT_S}: the node could not be
         * reached, or its connection took no data (a tensor given up before it was written whole never is).
         */
        REMOTE_TIMEOUT,
        /**
         * Not a definite failure: the tensor left this node whole for a consumer on another node, which did not
         * confirm it within {@code MSTAR_REMOTE_TIMEOUT_S} (the network or that node failed after it left). It may
         * have been handed over there. What this node's kernel still held of it is dropped as it is given up (the
         * connection is reset), so a partition that heals does not bring it there later. Its space here is freed.
         * A producer that must not lose it sends it again, and a consumer that must not see it twice checks the
         * request id.
         */
        IN_DOUBT,
        /** It never reached the consumer: no process runs as that entity, or it did not take the message. */
        REFUSED,
        /** It got no ACK within {@code MSTAR_SHM_ARENA_SLOT_TTL_S} and was reclaimed. */
        EXPIRED,
        /** The endpoint closed while it was in flight. */
        CLOSED,
        /**
         * The consumer's node refused this node's connection in its handshake: another secret, or its map does
         * not place this entity at this address ({@code PeerRejectedException} says which).
         */
        REJECTED,
        /**
         * Not a definite failure: a fan-out's tensor that some of its consumers never will have (the detail names
         * one and why; {@link #CONSUMER_DIED}, {@link #REMOTE_TIMEOUT} or {@link #REFUSED} for it) while the
         * others ACKed it. Send it again to the ones that failed only: the others handled it.
         */
        PARTIAL;

        /**
         * Whether the consumer's handler certainly never saw the tensor: every failure but {@link #IN_DOUBT} and
         * {@link #PARTIAL}.
         */
        public boolean isDefinite() {
            return this != IN_DOUBT && this != PARTIAL;
        }
    }

    String requestId();

    Status status();

    /** Whether the status is no longer {@link Status#PENDING}. */
    boolean isDone();

    /** Why it failed; null unless {@link Status#FAILED}. */
    Failure failure();

    /** The failure in words (which consumer, what cause); null unless {@link Status#FAILED}. */
    String detail();

    /**
     * Waits until the delivery is decided or the timeout passes; returns its status then (still
     * {@link Status#PENDING} on timeout). ACKs are read meanwhile, also when called from a handler.
     */
    Status await(Duration timeout) throws InterruptedException;
}
