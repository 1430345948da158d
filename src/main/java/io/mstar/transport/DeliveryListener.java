package io.mstar.transport;

import java.time.Duration;

/**
 * Hears what became of each tensor an endpoint sent: given once to {@link TensorEndpoint#open(Deployment,
 * DeliveryListener)}. Each tensor's outcome is told exactly once, and outcomes are told one at a time, in the order
 * they were decided (for one consumer, the order it ACKed), on the thread that learned them or the endpoint's ACK
 * thread: never two calls at once, never one inside another. A listener may call the endpoint: post, send, claim,
 * poll outcomes or close it; what those decide is told after it returns, by the same loop, so nothing it does grows
 * the stack. While it runs, later outcomes wait for it (the ACKs do not: they are still read and applied), so keep
 * it short and do not block. Or have it told on one thread of yours ({@link #toldWhenPolled()}). The delivered path
 * allocates nothing.
 */
public interface DeliveryListener {
    /** Every consumer of the tensor ACKed it; its space is free again. */
    void delivered(String requestId, long uuidMsb, long uuidLsb);

    /** The tensor will not be delivered: {@code failure} says why, {@code detail} names the consumer or cause. */
    void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail);

    /**
     * True: this listener is told only on a thread that calls {@link TensorEndpoint#pollOutcomes(int)} or
     * {@link TensorEndpoint#awaitOutcomes(int, Duration)}, the producer's own, say: the outcomes wait for it in
     * order, and no other thread ever calls it (no queue of the caller's own, no locking in the listener), but the
     * one that closes the endpoint: {@link TensorEndpoint#close()} tells every tensor still in flight
     * {@link Delivery.Failure#CLOSED} on its own thread.
     * False (the default): told on the thread that learns each outcome.
     */
    default boolean toldWhenPolled() {
        return false;
    }
}
