package io.mstar.transport;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Objects;

/**
 * A contiguous (row-major) tensor to send: element type, shape and its bytes, in heap or native memory.
 * The bytes are read during {@code send} only; the caller may reuse them afterwards.
 *
 * @param dtype element type
 * @param shape dimensions; a copy is kept
 * @param data  exactly {@code product(shape) x dtype.itemBytes()} bytes
 */
public record Tensor(DType dtype, long[] shape, MemorySegment data) {
    /** Most dimensions a tensor may have (the descriptor format's limit). */
    public static final int MAX_RANK = 8;

    public Tensor {
        Objects.requireNonNull(dtype, "dtype");
        Objects.requireNonNull(data, "data");
        shape = shape.clone();
        long expected = byteSize(dtype, shape);
        if (data.byteSize() != expected) {
            throw new IllegalArgumentException("tensor bytes do not match shape x item size: dtype=" + dtype
                + ", shape=" + Arrays.toString(shape) + ", expectedBytes=" + expected + ", dataBytes=" + data.byteSize()
                + " (pass a contiguous tensor, sliced to its exact size)");
        }
    }

    /** A tensor over {@code data} with the given shape. */
    public static Tensor of(DType dtype, MemorySegment data, long... shape) {
        return new Tensor(dtype, shape, data);
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** The number of dimensions. */
    public int rank() {
        return shape.length;
    }

    /** Dimension {@code i}, read without copying the shape. */
    public long dim(int i) {
        return shape[i];
    }

    /** Bytes of the tensor. */
    public long nbytes() {
        return data.byteSize();
    }

    /** {@code product(shape) x itemBytes}, refusing a rank above {@value #MAX_RANK}, negative dimensions and overflow. */
    public static long byteSize(DType dtype, long[] shape) {
        if (shape.length > MAX_RANK) {
            throw new IllegalArgumentException("tensor rank exceeds " + MAX_RANK + ": shape=" + Arrays.toString(shape));
        }
        long bytes = dtype.itemBytes();
        for (long dim : shape) {
            if (dim < 0) {
                throw new IllegalArgumentException("negative dimension: shape=" + Arrays.toString(shape));
            }
            bytes = Math.multiplyExact(bytes, dim);
        }
        return bytes;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Tensor t && dtype == t.dtype && Arrays.equals(shape, t.shape) && data.equals(t.data);
    }

    @Override
    public int hashCode() {
        return Objects.hash(dtype, Arrays.hashCode(shape), data);
    }

    @Override
    public String toString() {
        return "Tensor[dtype=" + dtype + ", shape=" + Arrays.toString(shape) + ", nbytes=" + nbytes() + "]";
    }
}
