package io.mstar.transport.onnx;

import ai.onnxruntime.OnnxTensor;
import io.mstar.transport.Delivery;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;

import java.lang.foreign.MemorySegment;

/**
 * An {@code OnnxTensor} pinned over writable memory that ORT writes a session output into
 * ({@link OrtBridge#output}): a claimed slot, published once the run returned, or memory the caller owns.
 * Publishing, aborting and closing release ORT's tensor first, then the claim, so ORT never holds memory
 * that belongs to the consumer. Used by one thread at a time.
 */
public final class OrtOutput implements AutoCloseable {
    private final TensorClaim claim; // null over caller-owned memory
    private final MemorySegment memory;
    private final OnnxTensor tensor;
    private boolean ended;

    OrtOutput(TensorClaim claim, MemorySegment memory, OnnxTensor tensor) {
        this.claim = claim;
        this.memory = memory;
        this.tensor = tensor;
    }

    /** The output's bytes, to read after a run and before publishing. */
    public MemorySegment memory() {
        checkOpen("read");
        return memory;
    }

    /** The ORT tensor, for ORT calls of the caller's own; only valid until the output is published or closed. */
    public OnnxTensor tensor() {
        checkOpen("use");
        return tensor;
    }

    /**
     * Releases ORT's tensor and publishes the claimed slot: from now on the consumer owns the bytes.
     *
     * @return the descriptor to send
     * @throws IllegalStateException when the output is not over a claim, or was published, aborted or closed
     */
    public TensorDescriptor publish() {
        return end().publish();
    }

    /** As {@link #publish()}, writing the descriptor's binary record at {@code offset} of {@code out}. */
    public int publish(MemorySegment out, long offset) {
        return end().publish(out, offset);
    }

    /**
     * Releases ORT's tensor and sends the claimed slot to {@code consumer} through {@code endpoint}: the
     * endpoint's way to publish.
     *
     * @throws IllegalStateException when the output is not over a claim, or was published, aborted or closed
     */
    public Delivery sendTo(TensorEndpoint endpoint, String consumer) {
        return endpoint.send(consumer, end());
    }

    /** Releases ORT's tensor and frees the claimed slot; nothing is published. */
    public void abort() {
        end().abort();
    }

    /** Aborts an output that was neither published nor aborted. Idempotent. */
    @Override
    public void close() {
        if (ended) {
            return;
        }
        ended = true;
        try {
            tensor.close();
        } finally {
            if (claim != null) {
                claim.close();
            }
        }
    }

    // The memory ORT writes, for the run to hold (which checks it is still mapped); throws, naming the output,
    // once it was published, aborted or closed.
    MemorySegment memory(String name) {
        if (ended) {
            throw new IllegalStateException("ORT output " + name + " was published, aborted or closed: ORT must not"
                + " write there");
        }
        return memory;
    }

    // What a run may hand to ORT once it holds memory(name): an open tensor over memory that is still this output's.
    OnnxTensor usableTensor(String name) {
        String what = "ORT output " + name;
        if (tensor.isClosed()) {
            throw new IllegalStateException(what + ": its OnnxTensor was closed by hand");
        }
        if (claim != null) {
            try {
                claim.memory(); // throws once the claim was published or aborted by hand
            } catch (IllegalStateException claimEnded) {
                throw new IllegalStateException(what + ": its claim was published or aborted by hand", claimEnded);
            }
        }
        return tensor;
    }

    private TensorClaim end() {
        if (claim == null) {
            throw new IllegalStateException("this output is over the caller's memory, not a claim: nothing to publish");
        }
        checkOpen("publish or abort");
        ended = true;
        tensor.close();
        return claim;
    }

    private void checkOpen(String verb) {
        if (ended) {
            throw new IllegalStateException("cannot " + verb + " an ORT output that was published, aborted or closed");
        }
    }
}
