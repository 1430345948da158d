package io.mstar.transport.docs;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import io.mstar.transport.DType;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.onnx.OrtBridge;
import io.mstar.transport.onnx.OrtInput;
import io.mstar.transport.onnx.OrtOutput;

import java.util.List;
import java.util.Map;

/** The examples of docs/onnxruntime.md, compiled by the build (UserGuideTest checks the page shows them). */
final class OnnxExamples {
    private OnnxExamples() {
    }

    /** A stage between two others: its input read in place, its output written into a claimed slot. */
    static void stage(TensorTransport transport, TensorChannel mailbox, OrtSession session, String from,
                      TensorDescriptor d) throws OrtException {
        // tag::stage[]
        OrtBridge bridge = new OrtBridge(OrtEnvironment.getEnvironment(), transport);
        TensorDescriptor result;
        try (OrtInput x = bridge.input(transport.receive(d));                 // ORT reads the slot in place
             OrtOutput y = bridge.output(d.requestId(), DType.F32, d.dim(0), 16)) { // a claimed slot for ORT
            bridge.run(session, Map.of("x", x), Map.of("y", y));             // checked, then run
            result = y.publish();                        // ORT's tensor closes first, then the slot is published
        }                                                // x: ORT's tensor closes first, then the received view
        mailbox.sendAcks(from, List.of(d.uuid()));       // only now may the producer reuse the input's slot
        mailbox.sendDescriptors("next-stage", List.of(result));
        // end::stage[]
    }

    /** The first stage: inputs of its own, the output into the arena. */
    static TensorDescriptor firstStage(TensorTransport transport, OrtSession session, float[][] request)
        throws OrtException {
        // tag::firstStage[]
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        OrtBridge bridge = new OrtBridge(env, transport);
        try (OnnxTensor x = OnnxTensor.createTensor(env, request);
             OrtOutput y = bridge.output("request-1", DType.F32, request.length, 1024)) {
            bridge.runInto(session, Map.of("x", x), Map.of("y", y));
            return y.publish();
        }
        // end::firstStage[]
    }

    /** The last stage: its input read in place, its outputs in ORT's own memory. */
    static float[][] lastStage(TensorTransport transport, TensorChannel mailbox, OrtSession session, String from,
                               TensorDescriptor d) throws OrtException {
        // tag::lastStage[]
        OrtBridge bridge = new OrtBridge(OrtEnvironment.getEnvironment(), transport);
        float[][] logits;
        try (OrtInput x = bridge.input(transport.receive(d));
             OrtSession.Result result = bridge.run(session, Map.of("x", x))) { // held mapped for the run
            logits = (float[][]) result.get(0).getValue();  // ORT's memory: valid after the input closes
        }
        mailbox.sendAcks(from, List.of(d.uuid()));
        // end::lastStage[]
        return logits;
    }
}
