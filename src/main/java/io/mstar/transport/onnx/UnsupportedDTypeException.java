package io.mstar.transport.onnx;

import io.mstar.transport.DType;
import io.mstar.transport.exceptions.MstarTransportException;

/** A tensor's dtype has no ONNX Runtime Java type (the 8-bit floats): it cannot be handed to ORT in place. */
public final class UnsupportedDTypeException extends MstarTransportException {
    private final DType dtype;

    UnsupportedDTypeException(DType dtype) {
        super("dtype " + dtype + " has no ONNX Runtime Java type; ORT's Java API takes F32, F64, F16, BF16, I8, U8,"
            + " I16, I32, I64 and BOOL: convert the tensor first, or send it in one of those");
        this.dtype = dtype;
    }

    public DType dtype() {
        return dtype;
    }
}
