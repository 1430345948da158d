package io.mstar.transport;

import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

/**
 * Moves tensors between processes of one machine, underneath {@link TensorEndpoint}: for an application
 * that carries descriptors on a channel of its own (its RPC, a queue). A producer {@link #send sends} a
 * batch of tensors and gets their descriptors, which travel to the consumer however the application likes;
 * the consumer {@link #receive receives} them (zero-copy views) and ACKs their uuids back; the producer's
 * {@link #ack} frees the space.
 *
 * <p>The allocation-free calls (records, uuid halves, primitive columns) are a view of their own,
 * {@link #records()}; what only some transports can do is a {@link #capability} a caller asks for
 * ({@code staging.DeviceTransfers}, {@code liveness.ConsumerLiveness}).
 *
 * <p>All methods are thread-safe: a sender thread and an ACK thread may share one transport.
 * Build one with {@link TensorTransports#create}.
 */
public interface TensorTransport extends AutoCloseable {
    /**
     * Sends the tensors of one request: one copy per tensor into shared memory, descriptors returned in
     * order once every copy has landed. When the arena is full it waits for ACKs, then spills.
     *
     * @throws io.mstar.transport.exceptions.CapacityException when there is no room even after waiting (strict
     *                                                         mode), or no room to spill; nothing of the batch
     *                                                         stays reserved
     */
    List<TensorDescriptor> send(String requestId, List<Tensor> tensors);

    /**
     * As {@link #send(String, List)}, for tensors that several consumers read (fan-out): each tensor's space
     * is freed only once every named consumer has ACKed it with {@link #ack(String, Collection)}, or died
     * (with the mailbox attached), or the TTL passed. Send the same descriptors to each of them.
     *
     * @param consumers 1 to 64 distinct entities
     * @throws IllegalArgumentException when the list is empty, too long or repeats a name
     */
    List<TensorDescriptor> send(String requestId, List<Tensor> tensors, List<String> consumers);

    /**
     * Claims room for one tensor of {@code dtype} and {@code shape}, for the producer to write in place and
     * then publish (see {@link TensorClaim}): the zero-copy send. The room follows the capacity ladder as a
     * send does: a slot, else a wait for ACKs, else a spill file mapped writable.
     *
     * @throws io.mstar.transport.exceptions.CapacityException as {@link #send(String, List)} does
     */
    TensorClaim claim(String requestId, DType dtype, long... shape);

    /**
     * Opens one received tensor for reading in place.
     *
     * @throws io.mstar.transport.exceptions.SegmentAccessException when its segment or file is gone (its
     *                                                              producer died) or fails a check
     */
    ReceivedTensor receive(TensorDescriptor descriptor);

    /** Producer side: the consumer is done with these tensors. Unknown or repeated uuids are counted and ignored. */
    void ack(Collection<UUID> uuids);

    /**
     * Producer side: {@code consumer} is done with these tensors. For a fan-out tensor its share counts once
     * (a repeat, or an ACK from a consumer that was not named, is counted in {@code ignoredAcks}); the last
     * share frees it. For any other tensor it frees as {@link #ack(Collection)} does.
     */
    void ack(String consumer, Collection<UUID> uuids);

    /** The same transport's allocation-free calls: descriptor records, uuid halves, primitive columns. */
    TensorRecords records();

    /**
     * What only some transports can do, when this one can: {@code DeviceTransfers.class} (the arena's device
     * path), {@code ConsumerLiveness.class} (freeing what a dead consumer held: the arena's); empty otherwise.
     */
    <T> Optional<T> capability(Class<T> type);

    TransportStats statsSummary();

    /** Unlinks and unmaps everything this transport owns and unmaps its peers' segments. Idempotent. */
    @Override
    void close();
}
