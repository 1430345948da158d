package io.mstar.transport;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.UUID;

/**
 * Carries descriptor batches from producers to consumers and ACK batches back, between the entities
 * of one deployment. The built-in implementation is a shared-memory mailbox per receiving entity
 * ({@link TensorChannels#mailbox}); an application with a channel of its own (its RPC, a queue) can
 * carry descriptors instead, encoded with {@code io.mstar.transport.codec.DescriptorCodec} or as it
 * likes, and call {@link TensorTransport#receive} and {@link TensorTransport#ack} itself.
 */
public interface TensorChannel extends AutoCloseable {
    /**
     * Sends a batch of descriptors to {@code toEntity}; blocks while its mailbox is full.
     *
     * @throws PeerUnavailableException when {@code toEntity} never started, or died and has not come back;
     *                                  the tensors stay in flight (send them again, or ACK them yourself)
     */
    void sendDescriptors(String toEntity, List<TensorDescriptor> descriptors);

    /**
     * Sends one batch of descriptors to several entities (the consumers of a fan-out send). Every one that
     * runs gets it, even when another does not.
     *
     * @throws PeerUnavailableException for the first entity that never started, or died and has not come
     *                                  back (the others are suppressed in it), after delivering to the rest
     */
    default void sendDescriptors(Collection<String> toEntities, List<TensorDescriptor> descriptors) {
        PeerUnavailableException unavailable = null;
        for (String to : toEntities) {
            try {
                sendDescriptors(to, descriptors);
            } catch (PeerUnavailableException e) {
                if (unavailable == null) {
                    unavailable = e;
                } else {
                    unavailable.addSuppressed(e);
                }
            }
        }
        if (unavailable != null) {
            throw unavailable;
        }
    }

    /**
     * Sends ACKs to {@code toEntity}, the producer of these tensors.
     *
     * @throws PeerUnavailableException when {@code toEntity} never started, or died and has not come back
     */
    void sendAcks(String toEntity, Collection<UUID> uuids);

    /**
     * Waits until {@code entity} runs and can receive (it started, or a restarted process took its place),
     * or the timeout passes; returns whether it runs.
     */
    boolean awaitPeer(String entity, Duration timeout) throws InterruptedException;

    /**
     * Delivers up to {@code limit} waiting messages to the listener without blocking; returns how many.
     *
     * @throws IllegalStateException when the channel is closed (also when another thread closes it meanwhile)
     */
    int poll(Listener listener, int limit);

    /**
     * Waits (with a backoff idle strategy) until at least one message is delivered or the timeout passes.
     *
     * @throws IllegalStateException when the channel is closed (also when another thread closes it meanwhile)
     */
    int receive(Listener listener, Duration timeout);

    @Override
    void close();

    /** Receives messages; called on the polling thread. It may throw: the message is then counted as failed. */
    interface Listener {
        void descriptors(String fromEntity, List<TensorDescriptor> descriptors);

        void acks(String fromEntity, List<UUID> uuids);
    }
}
