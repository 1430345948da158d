package io.mstar.transport.staging;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;

import java.util.Arrays;
import java.util.Objects;

/**
 * A contiguous tensor in GPU memory, to send with {@link DeviceTransfers#sendFromDevice}: element type,
 * shape and the device pointer ({@code cudaMalloc}'d or a framework's tensor data pointer). The
 * producer must have finished writing it (synchronized its own stream) before sending.
 */
public record DeviceTensor(DType dtype, long[] shape, long devicePointer) {
    public DeviceTensor {
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
        Tensor.byteSize(dtype, shape); // checks the rank and the dimensions
        if (devicePointer == 0) {
            throw new IllegalArgumentException("device pointer is null");
        }
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    public long nbytes() {
        return Tensor.byteSize(dtype, shape);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof DeviceTensor t && dtype == t.dtype && Arrays.equals(shape, t.shape)
            && devicePointer == t.devicePointer;
    }

    @Override
    public int hashCode() {
        return Objects.hash(dtype, Arrays.hashCode(shape), devicePointer);
    }

    @Override
    public String toString() {
        return "DeviceTensor[dtype=" + dtype + ", shape=" + Arrays.toString(shape) + ", devicePointer=0x"
            + Long.toHexString(devicePointer) + "]";
    }
}
