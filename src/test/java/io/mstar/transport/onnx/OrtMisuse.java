package io.mstar.transport.onnx;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.examples.TinyModels;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

/**
 * A child JVM that misuses the adapter in every way that would make ORT crash the JVM, and prints
 * {@code REFUSED <case>: <exception>} for each the adapter turned into an exception. Inputs come from an
 * arena (a peer segment the consumer maps, unmapped when its transport closes); outputs are claimed on a
 * file transport (a file mapped writable for that tensor, unmapped when published): ORT touching either
 * after that would crash the JVM.
 */
public final class OrtMisuse {
    static final List<String> CASES = List.of("view-closed", "tensor-closed", "input-closed", "transport-closed",
        "output-published", "output-tensor-closed", "input-segment-shrunk");

    private OrtMisuse() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        try (OrtSession session = env.createSession(TinyModels.denseRelu(OrtBridgeTest.IN, OrtBridgeTest.OUT, 7))) {
            for (String misuse : CASES) {
                try (TensorTransport producer = TensorTransports.create(deployment(dir, "1", "p-" + misuse), false);
                     TensorTransport consumer = TensorTransports.create(deployment(dir, "1", "c-" + misuse), false);
                     TensorTransport files = TensorTransports.create(deployment(dir, "0", "f-" + misuse), false)) {
                    String refused = attempt(misuse, dir, env, session, producer, consumer, files);
                    System.out.println(refused == null ? "RAN " + misuse : "REFUSED " + misuse + ": " + refused);
                }
            }
        }
    }

    private static Deployment deployment(Path dir, String arena, String entity) {
        return Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString(),
            TransportConfig.ARENA, arena)::get), "misuse", entity);
    }

    // The exception the run threw, or null when ORT ran.
    private static String attempt(String misuse, Path dir, OrtEnvironment env, OrtSession session, TensorTransport producer,
                                  TensorTransport consumer, TensorTransport files) throws Exception {
        TensorDescriptor x = OrtBridgeTest.publishInput(producer, 1);
        ReceivedTensor received = consumer.receive(x);
        OrtBridge inputs = new OrtBridge(env, consumer);
        OrtBridge outputs = new OrtBridge(env, files);
        try (OrtInput input = inputs.input(received);
             OrtOutput output = outputs.output("y", DType.F32, OrtBridgeTest.BATCH, OrtBridgeTest.OUT)) {
            switch (misuse) {
                case "view-closed" -> received.close();
                case "tensor-closed" -> input.tensor().close();
                case "input-closed" -> input.close();
                case "transport-closed" -> consumer.close();
                case "output-published" -> output.publish();
                case "output-tensor-closed" -> output.tensor().close();
                case "input-segment-shrunk" -> { // a process of this user truncates the producer's segment
                    try (java.nio.channels.FileChannel f = java.nio.channels.FileChannel.open(
                        dir.resolve(x.fileName()), java.nio.file.StandardOpenOption.WRITE)) {
                        f.truncate(0);
                    }
                }
                default -> throw new IllegalArgumentException(misuse);
            }
            inputs.run(session, Map.of("x", input), Map.of("y", output));
            return null;
        } catch (IllegalStateException | io.mstar.transport.exceptions.SegmentAccessException e) {
            return e.getMessage();
        } finally {
            producer.ack(List.of(x.uuid()));
            ((io.mstar.transport.spill.FileTransport) files).unlinkOwnedFiles(); // what was published here has no consumer
        }
    }
}
