package io.mstar.transport;

/**
 * Hears what became of each tensor an endpoint sent: given once to {@link TensorEndpoint#open(Deployment,
 * DeliveryListener)}. Called on the thread that learned it (the one that read the ACK, the liveness check's,
 * the sender's for a refusal); keep it short, and do not block. The delivered path allocates nothing.
 */
public interface DeliveryListener {
    /** Every consumer of the tensor ACKed it; its space is free again. */
    void delivered(String requestId, long uuidMsb, long uuidLsb);

    /** The tensor will not be delivered: {@code failure} says why, {@code detail} names the consumer or cause. */
    void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail);
}
