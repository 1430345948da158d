package io.mstar.transport;

import java.lang.foreign.MemorySegment;

/**
 * A received tensor, read in place: a read-only view of the producer's bytes. Close it when done
 * reading, and only then ACK its uuid to the producer: the producer reuses the space after the ACK.
 * After close, {@link #data()} throws {@link IllegalStateException}; a view kept from before must not
 * be read (it never crashes the JVM: once the mapping is dropped, access throws).
 */
public interface ReceivedTensor extends AutoCloseable {
    TensorDescriptor descriptor();

    /** The tensor's bytes, read-only, {@code descriptor().nbytes()} long. */
    MemorySegment data();

    /** Releases the view. Idempotent; never throws. */
    @Override
    void close();
}
