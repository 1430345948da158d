package io.mstar.transport.shm;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * A hold on the mappings under memory that native code is about to read or write through its raw address
 * (ONNX Runtime over a received tensor or a claimed slot, say): while it is held, a close of the transport,
 * a shutdown hook or a peer-segment release does not unmap them ({@link MappedSegment}). Memory that is
 * not one of this library's mappings (the heap, ORT's own, the caller's) needs no hold.
 *
 * <pre>
 *   try (NativeUse use = NativeUse.of(input, output)) {
 *       session.run(...); // the mappings stay until here
 *   }
 * </pre>
 */
public final class NativeUse implements AutoCloseable {
    private final List<MappedSegment> held;

    private NativeUse(List<MappedSegment> held) {
        this.held = held;
    }

    /**
     * Holds the mappings under each memory.
     *
     * @throws IllegalStateException naming the memory when its mapping is closed: native code must not touch it
     */
    public static NativeUse of(MemorySegment... memories) {
        List<MappedSegment> held = new ArrayList<>(memories.length);
        boolean ok = false;
        try {
            for (MemorySegment memory : memories) {
                if (!memory.isNative()) {
                    continue;
                }
                MappedSegment mapping = MappedSegment.sharedMappingOf(memory.address(), memory.byteSize());
                if (mapping != null) {
                    if (!mapping.beginNativeUse()) {
                        throw new IllegalStateException("memory is no longer mapped (its transport closed): path="
                            + mapping.path());
                    }
                    held.add(mapping);
                }
                if (!memory.scope().isAlive()) { // held or not ours: either way it must be alive now
                    throw new IllegalStateException("memory is no longer mapped (its transport closed)");
                }
            }
            ok = true;
            return new NativeUse(held);
        } finally {
            if (!ok) {
                held.forEach(MappedSegment::endNativeUse);
            }
        }
    }

    /** Releases every hold; a mapping closed meanwhile is unmapped by its last release. */
    @Override
    public void close() {
        held.forEach(MappedSegment::endNativeUse);
        held.clear();
    }
}
