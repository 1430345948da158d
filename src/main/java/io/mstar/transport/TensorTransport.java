package io.mstar.transport;

import io.mstar.transport.codec.DescriptorCodec;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

/**
 * Moves tensors between processes of one machine. A producer {@link #send sends} a batch of tensors and
 * gets their descriptors, which travel to the consumer on any channel (the built-in mailbox or the
 * application's own); the consumer {@link #receive receives} them (zero-copy views) or
 * {@link #copyTo copies} them out, and ACKs their uuids back; the producer's {@link #ack} frees the
 * space.
 *
 * <p>What every transport does is here: send, receive, ACK, stats and close. What only some can do is a
 * capability of its own that a caller asks for and gets or not: {@link #deviceTransfers()},
 * {@link #consumerLiveness()}.
 *
 * <p>All methods are thread-safe: a sender thread and an ACK thread may share one transport.
 * Build one with {@link TensorTransports#create}.
 */
public interface TensorTransport extends AutoCloseable {
    /**
     * Sends the tensors of one request: one copy per tensor into shared memory, descriptors returned in
     * order once every copy has landed. When the arena is full it waits for ACKs, then spills.
     *
     * @throws CapacityException when there is no room even after waiting (strict mode), or no room to
     *                           spill; nothing of the batch stays reserved
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
     * Sends one tensor and writes its descriptor, in the codec's binary form, at {@code offset} of
     * {@code out} (a message buffer, a ring): the steady-state path of the arena allocates nothing when the
     * strings are ASCII. Pair it with {@link #ack(long, long)}; the uuid is at bytes 16..31 of the record.
     *
     * @return the bytes written
     */
    default int sendInto(String requestId, Tensor tensor, MemorySegment out, long offset) {
        return DescriptorCodec.encode(send(requestId, List.of(tensor)).getFirst(), out, offset);
    }

    /**
     * Claims room for one tensor of {@code dtype} and {@code shape}, for the producer to write in place and
     * then publish (see {@link TensorClaim}): the zero-copy send. The room follows the capacity ladder as a
     * send does: a slot, else a wait for ACKs, else a spill file mapped writable.
     *
     * @throws CapacityException as {@link #send(String, List)} does
     */
    TensorClaim claim(String requestId, DType dtype, long... shape);

    /** ACKs one tensor by the two halves of its uuid; allocates nothing on the arena's path. */
    default void ack(long uuidMsb, long uuidLsb) {
        ack(List.of(new UUID(uuidMsb, uuidLsb)));
    }

    /**
     * Opens one received tensor for reading in place.
     *
     * @throws SegmentAccessException when its segment or file is gone (its producer died) or fails a check
     */
    ReceivedTensor receive(TensorDescriptor descriptor);

    /**
     * Receives the tensor that a descriptor's record (its {@code DescriptorCodec} binary form, as a
     * {@link TensorChannel.RecordListener} is handed it) names, without making the descriptor: validates the
     * record, then hands the tensor's bytes to {@code reader} in place, and releases them when it returns. On
     * the arena a tensor in a slot allocates nothing; ACK it with {@link #ack(long, long)} and the record's
     * uuid halves ({@code DescriptorCodec.uuidMsb/uuidLsb}).
     *
     * @throws DescriptorFormatException naming the field of the record that fails
     */
    void receive(MemorySegment record, long offset, int length, TensorReader reader);

    /**
     * Opens a batch of received tensors. When one fails, the ones already opened are released and the
     * exception is thrown; use {@link #receive(TensorDescriptor)} per tensor to keep the others.
     */
    default List<ReceivedTensor> receive(List<TensorDescriptor> descriptors) {
        List<ReceivedTensor> opened = new ArrayList<>(descriptors.size());
        try {
            for (TensorDescriptor d : descriptors) {
                opened.add(receive(d));
            }
            return opened;
        } catch (RuntimeException e) {
            opened.forEach(ReceivedTensor::close);
            throw e;
        }
    }

    /** Copies a received tensor into {@code destination} (at least {@code nbytes} long). */
    default void copyTo(TensorDescriptor descriptor, MemorySegment destination) {
        try (ReceivedTensor tensor = receive(descriptor)) {
            MemorySegment.copy(tensor.data(), 0, destination, 0, descriptor.nbytes());
        }
    }

    /**
     * Stages the tensors of many requests in one call (one batch of copies), returning each request's
     * descriptors and the placements as primitive columns. Host copies complete before it returns.
     */
    default StagedBatch stage(List<StagingRequest<Tensor>> requests) {
        List<List<TensorDescriptor>> perRequest = new ArrayList<>(requests.size());
        for (StagingRequest<Tensor> r : requests) {
            perRequest.add(send(r.requestId(), r.tensors()));
        }
        return StagedBatch.of(perRequest);
    }

    /** Producer side: the consumer is done with these tensors. Unknown or repeated uuids are counted and ignored. */
    void ack(Collection<UUID> uuids);

    /**
     * Producer side: {@code consumer} is done with these tensors. For a fan-out tensor its share counts once
     * (a repeat, or an ACK from a consumer that was not named, is counted in {@code ignoredAcks}); the last
     * share frees it. For any other tensor it frees as {@link #ack(Collection)} does.
     */
    void ack(String consumer, Collection<UUID> uuids);

    TransportStats statsSummary();

    /**
     * Unlinks every file this transport created (spill files, then segments), for a process that is
     * stopping: peers keep the mappings they hold. Sending after this call creates new files.
     */
    void unlinkOwnedFiles();

    /**
     * The device path, when this transport has one: the arena's, to send tensors from GPU memory and copy
     * received ones into it; empty for the file transport.
     */
    Optional<DeviceTransfers> deviceTransfers();

    /**
     * Freeing what was sent to consumers that die before ACKing, when this transport can: the arena's;
     * empty for the file transport (whose files the TTL or a sweep after the producer's exit removes).
     */
    Optional<ConsumerLiveness> consumerLiveness();

    /** Unlinks and unmaps everything this transport owns and unmaps its peers' segments. Idempotent. */
    @Override
    void close();
}
