package io.mstar.transport;

import java.util.Arrays;
import java.util.Objects;
import java.util.UUID;

/**
 * What travels from producer to consumer for one tensor: its identity, type, shape and where its bytes
 * are. Small and immutable; encode it with the codec to carry it on your own channel.
 *
 * @param uuid       identity of this tensor; the consumer ACKs it
 * @param requestId  the request the tensor belongs to
 * @param producer   the producing entity
 * @param dtype      element type
 * @param shape      dimensions (contiguous, row-major); a copy is kept
 * @param nbytes     {@code product(shape) x dtype.itemBytes()}
 * @param placement  arena slot or spill file
 * @param fileName   the segment file (arena) or the spill file, in the shared-memory directory
 * @param offset     byte offset of the tensor in the segment (0 for spill files)
 */
public record TensorDescriptor(UUID uuid, String requestId, String producer, DType dtype, long[] shape,
                               long nbytes, Placement placement, String fileName, long offset) {
    public TensorDescriptor {
        Objects.requireNonNull(uuid, "uuid");
        Objects.requireNonNull(requestId, "requestId");
        Objects.requireNonNull(producer, "producer");
        Objects.requireNonNull(dtype, "dtype");
        Objects.requireNonNull(placement, "placement");
        Objects.requireNonNull(fileName, "fileName");
        shape = shape.clone();
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** Dimension {@code i} of the shape, without copying it. */
    /** Dimension {@code i}, read without copying the shape. */
    public long dim(int i) {
        return shape[i];
    }

    /** Number of dimensions. */
    /** The number of dimensions. */
    public int rank() {
        return shape.length;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorDescriptor d && uuid.equals(d.uuid) && requestId.equals(d.requestId)
            && producer.equals(d.producer) && dtype == d.dtype && Arrays.equals(shape, d.shape)
            && nbytes == d.nbytes && placement == d.placement && fileName.equals(d.fileName) && offset == d.offset;
    }

    @Override
    public int hashCode() {
        return uuid.hashCode();
    }

    @Override
    public String toString() {
        return "TensorDescriptor[uuid=" + uuid + ", requestId=" + requestId + ", producer=" + producer
            + ", dtype=" + dtype + ", shape=" + Arrays.toString(shape) + ", nbytes=" + nbytes
            + ", placement=" + placement + ", fileName=" + fileName + ", offset=" + offset + "]";
    }
}
