package io.mstar.transport.onnx;

import ai.onnxruntime.OnnxTensor;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorDescriptor;

import java.lang.foreign.MemorySegment;

/**
 * A received tensor as an {@code OnnxTensor} over its mapped bytes ({@link OrtBridge#input}). Close it,
 * then ACK the tensor: closing releases ORT's tensor first, then the view, so no ORT tensor outlives the
 * memory under it. Used by one thread at a time.
 */
public final class OrtInput implements AutoCloseable {
    private final ReceivedTensor received;
    private final OnnxTensor tensor;
    private boolean closed;

    OrtInput(ReceivedTensor received, OnnxTensor tensor) {
        this.received = received;
        this.tensor = tensor;
    }

    public TensorDescriptor descriptor() {
        return received.descriptor();
    }

    /**
     * The ORT tensor, for ORT calls of the caller's own; it is only valid until this input closes.
     *
     * @throws IllegalStateException once the input is closed
     */
    public OnnxTensor tensor() {
        if (closed) {
            throw new IllegalStateException("ORT input is closed: uuid=" + descriptor().uuid());
        }
        return tensor;
    }

    // The memory under the tensor, for the run to hold (which checks it is still mapped); throws, naming the
    // input, once the input or its received view is closed.
    MemorySegment memory(String name) {
        String what = "ORT input " + name + " (uuid=" + descriptor().uuid() + ")";
        if (closed) {
            throw new IllegalStateException(what + " is closed");
        }
        try {
            return received.data();
        } catch (IllegalStateException viewClosed) {
            throw new IllegalStateException(what + ": its received tensor was closed by hand", viewClosed);
        }
    }

    // What a run may hand to ORT once it holds memory(name): a tensor that is still open.
    OnnxTensor usableTensor(String name) {
        if (tensor.isClosed()) {
            throw new IllegalStateException("ORT input " + name + " (uuid=" + descriptor().uuid() + "): its OnnxTensor"
                + " was closed by hand");
        }
        return tensor;
    }

    /** Closes the ORT tensor, then the received view. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            tensor.close();
        } finally {
            received.close();
        }
    }
}
