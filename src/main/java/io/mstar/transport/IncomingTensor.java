package io.mstar.transport;

import java.lang.foreign.MemorySegment;

/**
 * A received tensor as a {@link TensorHandler} sees it: its descriptor's fields read from the record in place
 * and its bytes in place (read-only), valid only during the handler's call. Every accessor but
 * {@link #data()}, {@link #descriptor()} and {@link #keep()} allocates nothing.
 */
public interface IncomingTensor {
    /** The producer's entity, which the ACK goes to. */
    String from();

    /**
     * The request id, as a view of the record's bytes: a {@code CharSequence} that is never a {@code String},
     * so {@code "end".equals(tensor.requestId())} is false for every id. Compare it with
     * {@link #requestIdIs(CharSequence)} (no allocation), keep it with {@code toString()}.
     */
    CharSequence requestId();

    /** Whether the request id is {@code id}, character for character; allocates nothing for an ASCII id. */
    default boolean requestIdIs(CharSequence id) {
        return CharSequence.compare(requestId(), id) == 0;
    }

    long uuidMsb();

    long uuidLsb();

    DType dtype();

    int rank();

    /** Dimension {@code i} of the shape, {@code 0 <= i < rank()}. */
    long dim(int i);

    long nbytes();

    /**
     * Memory that holds the tensor's bytes at {@code [offset(), offset() + nbytes())}, read-only, valid during the
     * handler's call on its thread; a new segment each call (never a cache key).
     */
    MemorySegment memory();

    long offset();

    /** The tensor's bytes as a slice of their own ({@code memory().asSlice(offset(), nbytes())}). */
    MemorySegment data();

    /** The descriptor, decoded from the record. */
    TensorDescriptor descriptor();

    /**
     * Keeps the tensor past the handler: the endpoint does not ACK it when the handler returns; the returned
     * view stays readable until it is closed, and closing it sends the ACK. Call it during the handler, once.
     */
    ReceivedTensor keep();
}
