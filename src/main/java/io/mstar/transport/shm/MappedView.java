package io.mstar.transport.shm;

import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.StaleTensorException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.metrics.LatencyHistogram;

import java.lang.foreign.MemorySegment;
import java.util.function.BooleanSupplier;

/**
 * A {@link ReceivedTensor} over a slice of a mapping; closing it runs the release action once. A view of a slot
 * can tell whether the slot still holds its tensor ({@link #intact()}, the slot's stamp).
 */
public final class MappedView implements ReceivedTensor {
    private static final MemorySegment EMPTY = MemorySegment.ofArray(new byte[0]).asReadOnly();

    private final TensorDescriptor descriptor;
    private final MemorySegment data;
    private final Runnable release;
    private final BooleanSupplier intact;
    private final CloseOnce closer = new CloseOnce();
    private LatencyHistogram openToClose; // set once by the receiving transport, before the view is handed out
    private long openedAtNs;

    /** A view of bytes nobody reuses under it (a spill file, a copy). */
    public MappedView(TensorDescriptor descriptor, MemorySegment data, Runnable release) {
        this(descriptor, data, release, () -> true);
    }

    /** A view of a slot; {@code intact} checks its stamp. */
    public MappedView(TensorDescriptor descriptor, MemorySegment data, Runnable release, BooleanSupplier intact) {
        this.descriptor = descriptor;
        this.data = data;
        this.release = release;
        this.intact = intact;
    }

    /**
     * Whether the bytes read through this view so far were the tensor's: false once its slot was freed and
     * reused (the stamp names another tensor). Ask after reading, before closing.
     */
    public boolean intact() {
        return intact.getAsBoolean();
    }

    /**
     * Throws when {@link #intact()} is false: for a reader that has just read the bytes.
     *
     * @throws StaleTensorException when the slot was reused while it was read
     */
    public void checkIntact() {
        if (!intact()) {
            throw new StaleTensorException(descriptor.uuid(), "refused a tensor whose slot was reused while it was"
                + " read: uuid=" + descriptor.uuid() + ", segment=" + descriptor.fileName());
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
