package io.mstar.transport;

import java.time.Duration;

/**
 * Hears what became of each tensor an endpoint sent: given once to {@link TensorEndpoint#open(Deployment,
 * DeliveryListener)}. Called on the thread that learned it (the one that read the ACK, the liveness check's,
 * the sender's for a refusal); keep it short, and do not block. Two of them may call it at once (the ACK
 * thread, and a sender that took the ACKs waiting after its post), so make it thread-safe, or have it told
 * on one thread of yours ({@link #toldWhenPolled()}). The delivered path allocates nothing.
 */
public interface DeliveryListener {
    /** Every consumer of the tensor ACKed it; its space is free again. */
    void delivered(String requestId, long uuidMsb, long uuidLsb);

    /** The tensor will not be delivered: {@code failure} says why, {@code detail} names the consumer or cause. */
    void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail);

    /**
     * True: this listener is told only on a thread that calls {@link TensorEndpoint#pollOutcomes(int)} or
     * {@link TensorEndpoint#awaitOutcomes(int, Duration)}, the producer's own, say: the outcomes wait for it in
     * order, and no other thread ever calls it (no queue of the caller's own, no locking in the listener).
     * False (the default): told on the thread that learns each outcome.
     */
    default boolean toldWhenPolled() {
        return false;
    }
}
