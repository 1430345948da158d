package io.mstar.transport.examples;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.onnx.OrtBridge;
import io.mstar.transport.onnx.OrtInput;
import io.mstar.transport.onnx.OrtOutput;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/**
 * A two-process inference pipeline through the arena: stage A runs {@code Relu(x W1 + b1)} and ORT writes
 * its activation straight into a claimed slot, which is published to stage B; stage B runs
 * {@code Relu(h W2 + b2)} on the activation read in place, and ACKs. One request at a time.
 *
 * <pre>
 *   OnnxPipeline                  run 50 requests through two stage JVMs and check stage B's outputs are
 *                                 bitwise equal to running both models in this process
 *   OnnxPipeline compare [REQS]   per-request time through the adapter against the copying way
 *                                 (activations of 64 KiB, 1 MiB and 16 MiB), a table
 *   OnnxPipeline stage-a|stage-b DIR MODE REQUESTS ROWS   a stage (started by the above)
 * </pre>
 * The activation is {@code ROWS x 1024} floats. MODE {@code bridge} is the adapter; {@code copy} is what a
 * worker does without it: ORT's output copied to the heap and sent (copied into a slot), the received tensor
 * copied into a heap array that ORT copies once more.
 */
public final class OnnxPipeline {
    static final int IN = 4;
    static final int HIDDEN = 1024;
    static final int OUT = 4;
    private static final long SEED = 2026;

    private OnnxPipeline() {
    }

    public static void main(String[] args) throws Exception {
        String command = args.length == 0 ? "check" : args[0];
        switch (command) {
            case "check" -> System.exit(check(50, 64));
            case "compare" -> compare(args.length > 1 ? Integer.parseInt(args[1]) : 0);
            case "stage-a" -> stageA(Path.of(args[1]), args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            case "stage-b" -> stageB(Path.of(args[1]), args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException("unknown command " + command);
        }
    }

    /** Runs the pipeline and compares stage B's digest with both models run here; returns the exit code. */
    static int check(int requests, int rows) throws Exception {
        String[] result = pipeline("bridge", requests, rows);
        String expected = Long.toHexString(referenceDigest(requests, rows));
        boolean equal = result[1].equals(expected);
        System.out.println("pipeline: " + requests + " requests of " + rows + "x" + HIDDEN + " floats, stage B digest "
            + result[1] + ", in one process " + expected + ": " + (equal ? "bitwise equal" : "DIFFERENT"));
        return equal ? 0 : 1;
    }

    static void compare(int requestsOverride) throws Exception {
        System.out.println("| activation | adapter ms/request (min..max) | copying ms/request (min..max) | copying / adapter |");
        System.out.println("|---|---:|---:|---:|");
        for (int rows : new int[]{16, 256, 4096}) {
            int requests = requestsOverride > 0 ? requestsOverride : rows >= 4096 ? 40 : 200;
            double[] bridge = parseLatency(pipeline("bridge", requests, rows)[0]);
            double[] copy = parseLatency(pipeline("copy", requests, rows)[0]);
            System.out.printf("| %s | %.3f (%.3f..%.3f) | %.3f (%.3f..%.3f) | %.2f |%n",
                rows * HIDDEN * 4L >= 1 << 20 ? (rows * HIDDEN * 4L >> 20) + " MiB" : (rows * HIDDEN * 4L >> 10) + " KiB",
                bridge[0], bridge[1], bridge[2], copy[0], copy[1], copy[2], copy[0] / bridge[0]);
        }
    }

    private static double[] parseLatency(String line) {
        return Arrays.stream(line.split(" ")).skip(1).mapToDouble(Double::parseDouble).toArray();
    }

    // Starts stage B, then stage A, in a directory of their own; returns A's LATENCY line and B's digest.
    private static String[] pipeline(String mode, int requests, int rows) throws Exception {
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-pipeline-");
        try {
            Process b = stage("stage-b", dir, mode, requests, rows);
            Process a = stage("stage-a", dir, mode, requests, rows);
            String outA = finish(a);
            String outB = finish(b);
            return new String[]{line(outA, "LATENCY"), line(outB, "DIGEST").substring(7)};
        } finally {
            try (var left = Files.list(dir)) {
                List<Path> files = left.toList();
                if (!files.isEmpty()) {
                    throw new IllegalStateException("the stages left files: " + files);
                }
            }
            Files.delete(dir);
        }
    }

    private static Process stage(String stage, Path dir, String mode, int requests, int rows) throws IOException {
        String java = ProcessHandle.current().info().command().orElseThrow();
        return new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED",
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", System.getProperty("java.class.path"), OnnxPipeline.class.getName(), stage, dir.toString(), mode,
            Integer.toString(requests), Integer.toString(rows)).redirectErrorStream(true).start();
    }

    private static String finish(Process p) throws Exception {
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(300, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IllegalStateException("a stage failed:\n" + new String(out));
        }
        return new String(out);
    }

    private static String line(String out, String prefix) {
        return out.lines().filter(l -> l.startsWith(prefix)).findFirst()
            .orElseThrow(() -> new IllegalStateException("no " + prefix + " line in:\n" + out));
    }

    private static Deployment deployment(Path dir, String entity) {
        return Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString(),
            TransportConfig.ARENA, "1")::get), "pipeline", entity);
    }

    /** Request r's input: [rows, IN] floats drawn from a seed. */
    static float[][] input(int r, int rows) {
        SplittableRandom random = new SplittableRandom(SEED + r);
        float[][] x = new float[rows][IN];
        for (float[] row : x) {
            for (int j = 0; j < IN; j++) {
                row[j] = (float) (random.nextDouble() * 2 - 1);
            }
        }
        return x;
    }

    static void stageA(Path dir, String mode, int requests, int rows) throws Exception {
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment(dir, "stage-a"));
             OrtSession model = env.createSession(TinyModels.denseRelu(IN, HIDDEN, SEED))) {
            OrtBridge bridge = new OrtBridge(env, endpoint);
            endpoint.awaitPeer("stage-b", Duration.ofSeconds(60));
            long[] latencyNs = new long[requests];
            for (int r = 0; r < requests; r++) {
                long start = System.nanoTime();
                try (OnnxTensor x = OnnxTensor.createTensor(env, input(r, rows))) {
                    Delivery h;
                    if (mode.equals("bridge")) {
                        try (OrtOutput out = bridge.output("request-" + r, DType.F32, rows, HIDDEN)) {
                            bridge.runInto(model, Map.of("x", x), Map.of("y", out)); // ORT writes into the slot
                            h = out.sendTo(endpoint, "stage-b");
                        }
                    } else {
                        try (OrtSession.Result result = model.run(Map.of("x", x))) {
                            FloatBuffer y = ((OnnxTensor) result.get(0)).getFloatBuffer(); // copy 1: ORT to heap
                            MemorySegment heap = MemorySegment.ofBuffer(y);
                            h = endpoint.send("stage-b", "request-" + r, Tensor.of(DType.F32, heap, rows, HIDDEN));
                        }                                                                 // copy 2: heap to slot
                    }
                    if (h.await(Duration.ofSeconds(60)) != Delivery.Status.DELIVERED) {
                        throw new IllegalStateException("request-" + r + " not delivered: " + h);
                    }
                }
                latencyNs[r] = System.nanoTime() - start;
            }
            Arrays.sort(latencyNs);
            System.out.printf("LATENCY %.4f %.4f %.4f%n", latencyNs[requests / 2] / 1e6, latencyNs[0] / 1e6,
                latencyNs[requests - 1] / 1e6);
        }
    }

    static void stageB(Path dir, String mode, int requests, int rows) throws Exception {
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        CRC32C digest = new CRC32C();
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment(dir, "stage-b"));
             OrtSession model = env.createSession(TinyModels.denseRelu(HIDDEN, OUT, SEED + 1));
             Arena arena = Arena.ofConfined()) {
            OrtBridge bridge = new OrtBridge(env, endpoint);
            MemorySegment result = arena.allocate((long) rows * OUT * Float.BYTES, 64);
            int[] done = {0};
            TensorHandler handler = tensor -> {
                try {
                    if (mode.equals("bridge")) {
                        // Kept for ORT's run, closed (and so ACKed) when the input closes.
                        try (OrtInput h = bridge.input(tensor.keep());
                             OrtOutput y = bridge.output(result, DType.F32, rows, OUT)) {
                            bridge.run(model, Map.of("x", h), Map.of("y", y)); // reads the slot in place
                        }
                        digest.update(result.asByteBuffer());
                    } else {
                        digest.update(copyingRun(env, model, tensor.data(), rows));
                    }
                } catch (OrtException e) {
                    throw new IllegalStateException(e);
                }
                done[0]++;
            };
            while (done[0] < requests) {
                endpoint.receive(handler, Duration.ofSeconds(1));
            }
        }
        System.out.println("DIGEST " + Long.toHexString(digest.getValue()));
    }

    // Without the adapter: the activation copied out of the slot into a heap array, which ORT copies again.
    private static ByteBuffer copyingRun(OrtEnvironment env, OrtSession model, MemorySegment in, int rows)
        throws OrtException {
        float[] h = new float[rows * HIDDEN];
        MemorySegment.copy(in, ValueLayout.JAVA_FLOAT_UNALIGNED, 0, h, 0, h.length);
        try (OnnxTensor x = OnnxTensor.createTensor(env, FloatBuffer.wrap(h), new long[]{rows, HIDDEN});
             OrtSession.Result result = model.run(Map.of("x", x))) {
            return littleEndian(((OnnxTensor) result.get(0)).getFloatBuffer());
        }
    }

    /** Both models in one process, the usual way, over the same inputs: the digest stage B must match. */
    static long referenceDigest(int requests, int rows) throws OrtException {
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        CRC32C digest = new CRC32C();
        try (OrtSession a = env.createSession(TinyModels.denseRelu(IN, HIDDEN, SEED));
             OrtSession b = env.createSession(TinyModels.denseRelu(HIDDEN, OUT, SEED + 1))) {
            for (int r = 0; r < requests; r++) {
                try (OnnxTensor x = OnnxTensor.createTensor(env, input(r, rows));
                     OrtSession.Result h = a.run(Map.of("x", x));
                     OrtSession.Result y = b.run(Map.of("x", (OnnxTensor) h.get(0)))) {
                    digest.update(littleEndian(((OnnxTensor) y.get(0)).getFloatBuffer()));
                }
            }
        }
        return digest.getValue();
    }

    private static ByteBuffer littleEndian(FloatBuffer floats) {
        ByteBuffer bytes = ByteBuffer.allocate(floats.remaining() * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        bytes.asFloatBuffer().put(floats);
        return bytes;
    }
}
