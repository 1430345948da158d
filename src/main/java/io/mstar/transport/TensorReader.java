package io.mstar.transport;

import java.lang.foreign.MemorySegment;

/**
 * Reads one received tensor in place during {@link TensorTransport#receive(MemorySegment, long, int, TensorReader)}:
 * its bytes are {@code [offset, offset + nbytes)} of {@code memory} (read-only), valid only during the call.
 * Make one and reuse it: a receive through a reader allocates nothing on the arena.
 */
@FunctionalInterface
public interface TensorReader {
    void read(MemorySegment memory, long offset, long nbytes);
}
