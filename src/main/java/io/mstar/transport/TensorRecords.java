package io.mstar.transport;

import java.lang.foreign.MemorySegment;

/**
 * A transport's calls that allocate nothing on the arena: a descriptor travels as its record (the
 * {@code DescriptorCodec} binary form, in a buffer of the caller's), an ACK as its uuid's two halves. {@link TensorEndpoint} uses them on its fast path; an
 * application with a channel of its own can too. Get it with {@link TensorTransport#records()}.
 */
public interface TensorRecords {
    /**
     * Sends one tensor and writes its descriptor's record at {@code offset} of {@code out} (at least
     * {@code DescriptorCodec.MAX_RECORD_BYTES} free bytes): allocates nothing when the strings are ASCII.
     * The uuid is at bytes 16..31 of the record ({@code DescriptorCodec.uuidMsb/uuidLsb}).
     *
     * @return the bytes written
     */
    int sendInto(String requestId, Tensor tensor, MemorySegment out, long offset);

    /**
     * As {@link #sendInto}, the tensor's bytes written in place by {@code writer} (into its slot, or its spill
     * file where the ladder says spill) instead of copied from a tensor: claim, write and publish in one call,
     * with no claim object. On the arena this allocates nothing ({@code shape} is read, not kept). A writer
     * that throws frees the room and nothing is sent.
     *
     * @return the bytes of the record written at {@code offset} of {@code out}
     */
    int sendWritten(String requestId, DType dtype, long[] shape, Writer writer, MemorySegment out, long offset);

    /**
     * Receives the tensor that a record names, without making the descriptor: validates the record against
     * this process's namespace, then hands the tensor's bytes to {@code reader} in place and releases them
     * when it returns.
     *
     * @throws io.mstar.transport.exceptions.DescriptorFormatException naming the field of the record that fails
     */
    void receive(MemorySegment record, long offset, int length, Reader reader);

    /** ACKs one tensor by its uuid's halves, as {@link TensorTransport#ack(java.util.Collection)}. */
    void ack(long uuidMsb, long uuidLsb);

    /** ACKs one tensor on behalf of {@code consumer}, as {@link TensorTransport#ack(String, java.util.Collection)}. */
    void ack(String consumer, long uuidMsb, long uuidLsb);

    /**
     * Frees one tensor as {@code consumer}'s ACK would, because that consumer refused it or never got it: counted
     * in {@code refusals}, not {@code acks} (which counts only ACKs of tensors their consumers handled).
     */
    void refused(String consumer, long uuidMsb, long uuidLsb);

    /**
     * Reads one received tensor in place during {@link #receive}: its bytes are {@code [offset, offset + nbytes)}
     * of {@code memory} (read-only), valid only during the call. Make one and reuse it: a receive through a
     * reader allocates nothing on the arena.
     */
    @FunctionalInterface
    interface Reader {
        void read(MemorySegment memory, long offset, long nbytes);
    }

    /**
     * Writes one tensor's bytes in place during {@link #sendWritten}: {@code room} is exactly the tensor's bytes
     * (its slot, or its spill file), writable only during the call. Make one and reuse it.
     */
    @FunctionalInterface
    interface Writer {
        void write(MemorySegment room);
    }
}
