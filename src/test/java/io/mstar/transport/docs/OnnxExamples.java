package io.mstar.transport.docs;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.onnx.OrtBridge;
import io.mstar.transport.onnx.OrtInput;
import io.mstar.transport.onnx.OrtOutput;

import java.time.Duration;
import java.util.Map;

/** The examples of docs/onnxruntime.md, compiled by the build (UserGuideTest checks the page shows them). */
final class OnnxExamples {
    private OnnxExamples() {
    }

    /** A stage between two others: its input read in place, its output written into a claimed slot. */
    static void stage(TensorEndpoint endpoint, OrtSession session) {
        // tag::stage[]
        OrtBridge bridge = new OrtBridge(OrtEnvironment.getEnvironment(), endpoint);
        endpoint.receive(tensor -> {
            try (OrtInput x = bridge.input(tensor.keep());                // ORT reads the slot in place
                 OrtOutput y = bridge.output(tensor.requestId().toString(), DType.F32, tensor.dim(0), 16)) {
                bridge.run(session, Map.of("x", x), Map.of("y", y));     // checked, then run
                y.sendTo(endpoint, "next-stage");        // ORT's tensor closes first, then the slot is sent
            } catch (OrtException e) {                   // x: ORT's tensor closes first, then the kept view,
                throw new IllegalStateException(e);      // whose close ACKs the input
            }
        }, Duration.ofSeconds(1));
        // end::stage[]
    }

    /** The first stage: inputs of its own, the output into the arena. */
    static Delivery firstStage(TensorEndpoint endpoint, OrtSession session, float[][] request) throws OrtException {
        // tag::firstStage[]
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        OrtBridge bridge = new OrtBridge(env, endpoint);
        try (OnnxTensor x = OnnxTensor.createTensor(env, request);
             OrtOutput y = bridge.output("request-1", DType.F32, request.length, 1024)) {
            bridge.runInto(session, Map.of("x", x), Map.of("y", y));
            return y.sendTo(endpoint, "next-stage");
        }
        // end::firstStage[]
    }

    /** The last stage: its input read in place, its outputs in ORT's own memory. */
    static float[][] lastStage(TensorEndpoint endpoint, OrtSession session) {
        // tag::lastStage[]
        OrtBridge bridge = new OrtBridge(OrtEnvironment.getEnvironment(), endpoint);
        float[][][] logits = new float[1][][];
        endpoint.receive(tensor -> {
            try (OrtInput x = bridge.input(tensor.keep());
                 OrtSession.Result result = bridge.run(session, Map.of("x", x))) { // held mapped for the run
                logits[0] = (float[][]) result.get(0).getValue();  // ORT's memory: valid after the input closes
            } catch (OrtException e) {
                throw new IllegalStateException(e);
            }
        }, Duration.ofSeconds(1));
        // end::lastStage[]
        return logits[0];
    }
}
