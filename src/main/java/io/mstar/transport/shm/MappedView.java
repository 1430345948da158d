package io.mstar.transport.shm;

import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.StaleTensorException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.metrics.LatencyHistogram;

import java.lang.foreign.MemorySegment;

/**
 * A {@link ReceivedTensor} over a slice of a mapping; closing it runs the release action once. A view of a slot
 * can tell whether the slot still holds its tensor ({@link #checkIntact()}, the slot's stamp).
 */
public final class MappedView implements ReceivedTensor {
    private static final MemorySegment EMPTY = MemorySegment.ofArray(new byte[0]).asReadOnly();

    private final TensorDescriptor descriptor;
    private final MemorySegment data;
    private final Runnable release;
    private final Runnable stampCheck;
    private final CloseOnce closer = new CloseOnce();
    private LatencyHistogram openToClose; // set once by the receiving transport, before the view is handed out
    private long openedAtNs;

    /** A view of bytes nobody reuses under it (a spill file, a copy). */
    public MappedView(TensorDescriptor descriptor, MemorySegment data, Runnable release) {
        this(descriptor, data, release, () -> { });
    }

    /** A view of a slot; {@code stampCheck} throws {@link StaleTensorException} once the slot holds another tensor. */
    public MappedView(TensorDescriptor descriptor, MemorySegment data, Runnable release, Runnable stampCheck) {
        this.descriptor = descriptor;
        this.data = data;
        this.release = release;
        this.stampCheck = stampCheck;
    }

    /**
     * Throws when the slot was freed and reused under this view (its stamp names another tensor): for a reader
     * that has just read the bytes.
     *
     * @throws StaleTensorException when the bytes read so far were not the tensor's (counted and logged)
     */
    public void checkIntact() {
        stampCheck.run();
    }

    /** As {@link #checkIntact()}, as a verdict: whether the bytes read through this view so far were the tensor's. */
    public boolean intact() {
        try {
            checkIntact();
            return true;
        } catch (StaleTensorException e) {
            return false;
        }
    }

    /** The view of a zero-byte tensor: nothing is mapped for it. */
    public static MappedView empty(TensorDescriptor descriptor) {
        return new MappedView(descriptor, EMPTY, () -> { });
    }

    @Override
    public TensorDescriptor descriptor() {
        return descriptor;
    }

    @Override
    public MemorySegment data() {
        if (closer.isClosed()) {
            throw new IllegalStateException("received tensor is closed: uuid=" + descriptor.uuid());
        }
        return data;
    }

    /** From now until its close, this view's time open is recorded in {@code histogram}. */
    public MappedView timed(LatencyHistogram histogram) {
        this.openToClose = histogram;
        this.openedAtNs = System.nanoTime();
        return this;
    }

    @Override
    public void close() {
        if (closer.close(release) && openToClose != null) {
            openToClose.record(System.nanoTime() - openedAtNs);
        }
    }
}
