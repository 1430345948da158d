package io.mstar.transport.onnx;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import io.mstar.transport.DType;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.shm.NativeUse;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;

/**
 * ONNX Runtime over one transport without copies. {@link #input} turns a received tensor into an
 * {@code OnnxTensor} over its mapped bytes; {@link #output} claims a slot and pins an {@code OnnxTensor}
 * over it, so that {@link #run} makes ORT write the result straight into the slot, ready to publish.
 *
 * <p>ORT checks nothing: a tensor over memory that is gone, a closed tensor, or an output over read-only
 * memory kills the JVM. So every run here first checks every input and output (open, its memory still
 * mapped, outputs writable) and throws {@link IllegalStateException} or {@link IllegalArgumentException}
 * naming the tensor instead, and holds their mappings until ORT returns, so that a close during the run
 * (a shutdown hook on SIGTERM, say) cannot unmap them under it. Call {@code session.run} on tensors of this
 * adapter only through its runs: {@link #run(OrtSession, Map)} serves a last stage whose outputs stay in
 * ORT's memory. The order of release is the holders': an {@link OrtInput} closes its
 * {@code OnnxTensor}, then the received view (then ACK it); an {@link OrtOutput} closes its
 * {@code OnnxTensor}, then publishes or aborts its claim. Holders, like claims, are used by one thread at a
 * time, and the transport must stay open while a run uses its tensors.
 */
public final class OrtBridge {
    private final OrtEnvironment env;
    private final TensorTransport transport;

    /** A bridge for a transport used without an endpoint: outputs are claimed from it. */
    public OrtBridge(OrtEnvironment env, TensorTransport transport) {
        this.env = env;
        this.transport = transport;
    }

    /** A bridge for an endpoint: outputs are claimed from its transport, and sent with {@link OrtOutput#sendTo}. */
    public OrtBridge(OrtEnvironment env, TensorEndpoint endpoint) {
        this(env, endpoint.transport());
    }

    /**
     * An {@code OnnxTensor} over a received tensor's bytes, read in place. The input takes {@code received}
     * over: closing the input closes the tensor, then the view.
     *
     * @throws UnsupportedDTypeException when ORT's Java API has no type for the tensor's dtype
     */
    public OrtInput input(ReceivedTensor received) throws OrtException {
        boolean ok = false;
        try {
            OnnxTensor tensor = tensorOver(env, received.data(), received.descriptor().dtype(),
                received.descriptor().shape());
            ok = true;
            return new OrtInput(received, tensor);
        } finally {
            if (!ok) {
                received.close();
            }
        }
    }

    /**
     * Claims room for an output of {@code dtype} and {@code shape} in the transport (a slot, or a spill file
     * when the arena is full) and pins an {@code OnnxTensor} over it: {@link #run} makes ORT write there.
     *
     * @throws UnsupportedDTypeException when ORT's Java API has no type for {@code dtype}
     */
    public OrtOutput output(String requestId, DType dtype, long... shape) throws OrtException {
        ortType(dtype); // refuse before claiming
        TensorClaim claim = transport.claim(requestId, dtype, shape);
        boolean ok = false;
        try {
            OrtOutput output = new OrtOutput(claim, claim.memory(), tensorOver(env, claim.memory(), dtype, shape));
            ok = true;
            return output;
        } finally {
            if (!ok) {
                claim.abort();
            }
        }
    }

    /**
     * Pins an output over memory the caller owns and keeps mapped (a staging buffer, a slot claimed by hand).
     *
     * @throws IllegalArgumentException when the memory is read-only, on the Java heap (ORT would write into a
     *                                  copy), or not exactly the bytes of {@code shape}
     */
    public OrtOutput output(MemorySegment memory, DType dtype, long... shape) throws OrtException {
        if (memory.isReadOnly()) {
            throw new IllegalArgumentException("an output over read-only memory would crash the JVM when ORT writes"
                + " it: pin outputs over claimed slots or writable native memory");
        }
        if (!memory.isNative()) {
            throw new IllegalArgumentException("an output on the Java heap would be copied, and ORT's result lost:"
                + " pin outputs over claimed slots or native memory");
        }
        long expected = Tensor.byteSize(dtype, shape);
        if (memory.byteSize() != expected) {
            throw new IllegalArgumentException("output memory is " + memory.byteSize() + " bytes; dtype " + dtype
                + " and its shape need " + expected);
        }
        return new OrtOutput(null, memory, tensorOver(env, memory, dtype, shape));
    }

    /**
     * Runs {@code session} on the inputs, ORT writing each named output into its pinned memory. Every tensor
     * is checked before ORT sees it, and the mappings under them are held for the run ({@link NativeUse}): a
     * transport closed meanwhile (a shutdown hook, say) unmaps them only once ORT is done. Afterwards the
     * outputs hold the results, to publish.
     *
     * @throws IllegalStateException when an input or output was closed, published or aborted, or its memory is
     *                               no longer mapped (ORT would crash the JVM on it)
     * @throws io.mstar.transport.exceptions.SegmentAccessException when a shared-memory file under an input or
     *                               output was shrunk (truncated by a process of this user) before the run (ORT
     *                               is not called) or during it (the results are not to be believed; a shrink
     *                               during the run can crash the JVM inside ORT, see docs/security.md)
     */
    public void run(OrtSession session, Map<String, OrtInput> inputs, Map<String, OrtOutput> outputs)
        throws OrtException {
        try (NativeUse held = hold(inputs, outputs)) {
            Map<String, OnnxTensor> in = new HashMap<>(inputs.size() * 2);
            inputs.forEach((name, input) -> in.put(name, input.usableTensor(name)));
            session.run(in, pinned(outputs)).close(); // the result does not own pinned outputs: this leaves them open
            held.checkBacked();
        }
    }

    /**
     * Runs {@code session} on the inputs as {@link #run(OrtSession, Map, Map)} does, with every output in ORT's
     * own memory: the last stage of a pipeline, whose results do not go into the arena. The inputs' mappings
     * are held for the run; the result is the caller's to close, and stays valid after the inputs close.
     *
     * @throws IllegalStateException when an input was closed, or its memory is no longer mapped
     */
    public OrtSession.Result run(OrtSession session, Map<String, OrtInput> inputs) throws OrtException {
        try (NativeUse held = hold(inputs, Map.of())) {
            Map<String, OnnxTensor> in = new HashMap<>(inputs.size() * 2);
            inputs.forEach((name, input) -> in.put(name, input.usableTensor(name)));
            OrtSession.Result result = session.run(in);
            try {
                held.checkBacked();
            } catch (RuntimeException e) {
                result.close();
                throw e;
            }
            return result;
        }
    }

    /**
     * As {@link #run}, with inputs of the caller's own (tensors made from Java arrays or buffers, say): the
     * first stage of a pipeline, whose outputs go into the arena.
     *
     * @throws IllegalStateException when an input tensor is closed, or an output cannot be written any more
     */
    public void runInto(OrtSession session, Map<String, ? extends OnnxTensor> inputs, Map<String, OrtOutput> outputs)
        throws OrtException {
        inputs.forEach((name, tensor) -> {
            if (tensor.isClosed()) {
                throw new IllegalStateException("ORT input " + name + " is closed");
            }
        });
        try (NativeUse held = hold(Map.of(), outputs)) {
            session.run(inputs, pinned(outputs)).close();
            held.checkBacked();
        }
    }

    // Holds the mappings under every input and output until ORT is done with them.
    private static NativeUse hold(Map<String, OrtInput> inputs, Map<String, OrtOutput> outputs) {
        NativeUse use = new NativeUse();
        boolean ok = false;
        try {
            inputs.forEach((name, input) -> use.hold("ORT input " + name, input.memory(name)));
            outputs.forEach((name, output) -> use.hold("ORT output " + name, output.memory(name)));
            ok = true;
            return use;
        } finally {
            if (!ok) {
                use.close();
            }
        }
    }

    // The outputs' ORT tensors, each checked.
    private static Map<String, OnnxTensor> pinned(Map<String, OrtOutput> outputs) {
        Map<String, OnnxTensor> out = new HashMap<>(outputs.size() * 2);
        outputs.forEach((name, output) -> out.put(name, output.usableTensor(name)));
        return out;
    }

    /** ORT's Java type for a dtype. */
    static OnnxJavaType ortType(DType dtype) {
        return switch (dtype) {
            case F32 -> OnnxJavaType.FLOAT;
            case F64 -> OnnxJavaType.DOUBLE;
            case F16 -> OnnxJavaType.FLOAT16;
            case BF16 -> OnnxJavaType.BFLOAT16;
            case I8 -> OnnxJavaType.INT8;
            case U8 -> OnnxJavaType.UINT8;
            case I16 -> OnnxJavaType.INT16;
            case I32 -> OnnxJavaType.INT32;
            case I64 -> OnnxJavaType.INT64;
            case BOOL -> OnnxJavaType.BOOL;
            case F8_E4M3FN, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ -> throw new UnsupportedDTypeException(dtype);
        };
    }

    // A direct buffer over native memory is used in place by ORT; its Java byte order does not matter to ORT.
    // A small spilled tensor is received as a heap copy: it is copied once more into a direct buffer (ORT's
    // own copy of a heap ByteBuffer fails for every type but bytes).
    private static OnnxTensor tensorOver(OrtEnvironment env, MemorySegment memory, DType dtype, long[] shape)
        throws OrtException {
        OnnxJavaType type = ortType(dtype);
        ByteBuffer buffer = memory.isNative() ? memory.asByteBuffer()
            : ByteBuffer.allocateDirect((int) memory.byteSize()).put(memory.asByteBuffer()).flip();
        return OnnxTensor.createTensor(env, buffer.order(ByteOrder.nativeOrder()), shape, type);
    }
}
