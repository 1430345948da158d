package io.mstar.transport.shm;

import io.mstar.transport.exceptions.SegmentAccessException;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
    private final List<MemorySegment> ranges = new ArrayList<>();
    private final List<String> names = new ArrayList<>();
    private static volatile byte probeSink; // keeps the probing reads from being optimised away

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
            if (mapping != null) {
                ranges.add(memory);
                names.add(what);
                checkBacked(what, memory);
            }
            ok = true;
            return this;
        } finally {
            if (!ok) {
                close();
            }
        }
    }

    /**
     * Throws when a file under a held range was shrunk since it was held (a process of this user truncated
     * it): what native code read or wrote there is not to be believed. For after the native call.
     *
     * @throws SegmentAccessException naming the range whose file no longer backs it
     */
    public void checkBacked() {
        for (int i = 0; i < ranges.size(); i++) {
            checkBacked(names.get(i), ranges.get(i));
        }
    }

    /*
     * Whether the file still backs the whole range, by the kernel's own rule: a read of the range's last byte
     * faults (SIGBUS, which the JVM turns into an InternalError) exactly when the file ends before it. A file
     * only shrinks from its end, so this is the size check fstat would make, without a descriptor, and it holds
     * for a file already unlinked too. Native code would not survive that fault: it is asked here, in Java.
     */
    private static void checkBacked(String what, MemorySegment memory) {
        if (memory.byteSize() == 0) {
            return;
        }
        try {
            probeSink = memory.get(ValueLayout.JAVA_BYTE, memory.byteSize() - 1);
        } catch (InternalError fault) {
            throw new SegmentAccessException(what + ": the shared-memory file under it was shrunk (a process of this"
                + " user truncated it); native code must not touch it", fault);
        }
    }

    /** Releases every hold; a mapping closed meanwhile is unmapped by its last release. Idempotent. */
    @Override
    public void close() {
        held.forEach(MappedSegment::endNativeUse);
        held.clear();
        ranges.clear();
        names.clear();
    }
}
