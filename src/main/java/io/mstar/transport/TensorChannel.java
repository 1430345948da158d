package io.mstar.transport;

import io.mstar.transport.exceptions.PeerUnavailableException;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.UUID;

/**
 * Carries descriptor batches from producers to consumers and ACK batches back, between the entities
 * of one deployment: underneath {@link TensorEndpoint}, which reads and writes it for you. The built-in
 * implementation is a shared-memory mailbox per receiving entity ({@link TensorTransports#mailbox}); an
 * application with a channel of its own (its RPC, a queue) carries descriptors there instead, encoded
 * with {@code DescriptorCodec} (package {@code codec}) or as it likes, and calls
 * {@link TensorTransport#receive} and {@link TensorTransport#ack} itself.
 *
 * <p>The allocation-free calls (one record, one ACK by uuid halves, items in place) are a view of their
 * own, {@link #records()}.
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
     *
     * @throws io.mstar.transport.exceptions.PeerRejectedException when {@code entity} is on another node whose
     *                                  node refused this node's connection in the handshake (at once)
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

    /** The same channel's allocation-free calls. */
    Records records();

    @Override
    void close();

    /** Receives messages; called on the polling thread. It may throw: the message is then counted as failed. */
    interface Listener {
        void descriptors(String fromEntity, List<TensorDescriptor> descriptors);

        void acks(String fromEntity, List<UUID> uuids);

        /**
         * Tensors a consumer refused to hand over (their slot was reused under it, {@code staleReads}): each frees
         * that consumer's share as an ACK does; a listener that tells outcomes reports them failed. By default,
         * as ACKs.
         */
        default void refusals(String fromEntity, List<UUID> uuids) {
            acks(fromEntity, uuids);
        }
    }

    /**
     * A channel's calls that allocate nothing in steady state: with {@link TensorRecords}, a round trip of
     * records and uuid halves (unless a transport is attached to the mailbox to report to).
     */
    interface Records {
        /**
         * Sends one descriptor's record as it is (as {@link TensorRecords#sendInto} or
         * {@link TensorClaim#publish(MemorySegment, long)} wrote it).
         *
         * @throws PeerUnavailableException as {@link #sendDescriptors(String, List)}
         * @throws io.mstar.transport.exceptions.DescriptorFormatException when the bytes are not one record of
         *                                                                 {@code length} bytes
         */
        void sendDescriptorRecord(String toEntity, MemorySegment record, long offset, int length);

        /**
         * As {@link #sendDescriptorRecord}, for an endpoint's post: a channel that can deliver by position (the
         * shared-memory mailbox, to a local consumer) lets the consumer's handled position say it was handled instead
         * of an ACK, and its sender learns so when it reads its mailbox. By default, as sendDescriptorRecord.
         */
        default void postRecord(String toEntity, MemorySegment record, long offset, int length) {
            sendDescriptorRecord(toEntity, record, offset, length);
        }

        /** Sends one ACK by its uuid's halves. */
        void sendAck(String toEntity, long uuidMsb, long uuidLsb);

        /**
         * Tells a tensor's producer that this consumer refused it (its slot was reused under the read): it frees
         * this consumer's share as an ACK does, and the producer's outcome is a failure.
         */
        void sendRefusal(String toEntity, long uuidMsb, long uuidLsb);

        /**
         * Sends {@code count} ACKs in as few messages as fit, their uuids' halves in {@code uuidHalves} (most
         * significant, least significant, then the next): a consumer that gathers the ACKs of one poll sends
         * them at once.
         */
        void sendAcks(String toEntity, long[] uuidHalves, int count);

        /** As {@link #poll}, handing each descriptor record and each ACK to the listener one by one, in place. */
        int pollRecords(RecordListener listener, int limit);
    }

    /**
     * Receives messages item by item, in place ({@link Records#pollRecords}); called on the polling thread. A
     * record is valid only during the call: receive it ({@link TensorRecords#receive}), decode it
     * ({@code DescriptorCodec.decode}) or copy it. It may throw: the rest of that message is then counted as
     * failed.
     */
    interface RecordListener {
        void descriptor(String fromEntity, MemorySegment record, long offset, int length);

        void ack(String fromEntity, long uuidMsb, long uuidLsb);

        /** As {@link Listener#refusals}, one by one; by default as an ACK. */
        default void refused(String fromEntity, long uuidMsb, long uuidLsb) {
            ack(fromEntity, uuidMsb, uuidLsb);
        }

        /**
         * Called after the records of one message of descriptors were handed on: {@code ringPosition} is where the
         * message ends in the mailbox's ring. A consumer that delivers by position publishes it once it handled
         * them (an endpoint does); others may ignore it.
         */
        default void endOfMessage(long ringPosition) {
        }
    }
}
