package io.mstar.transport.shm;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * Holds on the mappings under memory that native code is about to read or write through its raw address
 * (ONNX Runtime over a received tensor or a claimed slot, say): while they are held, a close of the
 * transport, a shutdown hook or a peer-segment release does not unmap them ({@link MappedSegment}). Memory
 * that is not one of this library's mappings (the heap, ORT's own, the caller's) needs no hold. Used by one
 * thread.
 *
 * <pre>
 *   try (NativeUse use = new NativeUse().hold("input x", x).hold("output y", y)) {
 *       session.run(...); // the mappings stay until here
 *   }
 * </pre>
 */
public final class NativeUse implements AutoCloseable {
    private final List<MappedSegment> held = new ArrayList<>();

    /**
     * Holds the mapping under {@code memory}; on a refusal, releases what this use held so far.
     *
     * @throws IllegalStateException naming {@code what} when its memory is no longer mapped: native code must
     *                               not touch it
     */
    public NativeUse hold(String what, MemorySegment memory) {
        if (!memory.isNative()) {
            return this;
        }
        MappedSegment mapping = MappedSegment.sharedMappingOf(memory.address(), memory.byteSize());
        boolean ok = false;
        try {
            if (mapping != null) {
                if (!mapping.beginNativeUse()) {
                    throw new IllegalStateException(what + ": its memory is no longer mapped (its transport closed):"
                        + " path=" + mapping.path());
                }
                held.add(mapping);
            }
            if (!memory.scope().isAlive()) { // held or not ours: either way it must be alive now
                throw new IllegalStateException(what + ": its memory is no longer mapped (its transport closed)");
            }
            ok = true;
            return this;
        } finally {
            if (!ok) {
                close();
            }
        }
    }

    /** Releases every hold; a mapping closed meanwhile is unmapped by its last release. Idempotent. */
    @Override
    public void close() {
        held.forEach(MappedSegment::endNativeUse);
        held.clear();
    }
}
