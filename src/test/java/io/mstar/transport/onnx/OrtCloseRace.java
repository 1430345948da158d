package io.mstar.transport.onnx;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.examples.TinyModels;
import io.mstar.transport.lifecycle.ParentWatch;

import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A child JVM in which ONNX Runtime reads a received 128 MiB tensor in place while its consumer transport
 * closes: {@code close N SEED} closes it from another thread at a random instant of N runs; {@code sigterm}
 * runs without end (READY once running) for the parent's SIGTERM, whose shutdown hook closes it. Every run
 * completes or throws; the JVM never dies in ORT.
 */
public final class OrtCloseRace {
    static final long ROWS = (128L << 20) / (4 * OrtBridgeTest.IN); // a [ROWS, IN] float input of 128 MiB

    private OrtCloseRace() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Path dir = Path.of(args[0]);
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        try (OrtSession session = env.createSession(TinyModels.denseRelu(OrtBridgeTest.IN, OrtBridgeTest.OUT, 7));
             TensorTransport producer = TensorTransports.create(deployment(dir, "producer"), false)) {
            TensorDescriptor x;
            try (TensorClaim claim = producer.claim("x", DType.F32, ROWS, OrtBridgeTest.IN)) {
                claim.memory().fill((byte) 0x3c);
                x = claim.publish();
            }
            if (args[1].equals("sigterm")) {
                runUntilStopped(env, session, dir, x);
            } else {
                closeDuringRuns(env, session, dir, x, Integer.parseInt(args[2]), Long.parseLong(args[3]));
            }
            producer.ack(java.util.List.of(x.uuid()));
        }
    }

    private static Deployment deployment(Path dir, String entity) {
        return Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString(), TransportConfig.ARENA,
            "1", TransportConfig.SEGMENT_MB, "160", TransportConfig.MAX_SEGMENTS, "1")::get), "ort-race", entity);
    }

    private static void closeDuringRuns(OrtEnvironment env, OrtSession session, Path dir, TensorDescriptor x, int runs,
                                        long seed) throws Exception {
        SplittableRandom random = new SplittableRandom(seed);
        int completed = 0;
        int refused = 0;
        for (int i = 0; i < runs; i++) {
            TensorTransport consumer = TensorTransports.create(deployment(dir, "consumer-" + i), false);
            OrtBridge bridge = new OrtBridge(env, consumer);
            try (OrtInput input = bridge.input(consumer.receive(x))) {
                AtomicReference<String> outcome = new AtomicReference<>();
                Thread run = new Thread(() -> {
                    try (OrtSession.Result result = bridge.run(session, Map.of("x", input))) {
                        outcome.set(result.size() == 1 ? "completed" : "no output");
                    } catch (IllegalStateException e) {
                        outcome.set("refused");
                    } catch (Exception e) {
                        outcome.set("failed: " + e);
                    }
                });
                run.start();
                Thread.sleep(random.nextInt(60));
                consumer.close(); // as a shutdown hook would, while ORT may be reading
                run.join();
                switch (outcome.get()) {
                    case "completed" -> completed++;
                    case "refused" -> refused++;
                    default -> throw new AssertionError("run " + i + ": " + outcome.get());
                }
                try {
                    bridge.run(session, Map.of("x", input)).close();
                    throw new AssertionError("run " + i + ": a run after the close was not refused");
                } catch (IllegalStateException expected) {
                    // refused with an exception, never a crash
                }
            }
        }
        System.out.println("RESULT completed=" + completed + " refused=" + refused);
    }

    private static void runUntilStopped(OrtEnvironment env, OrtSession session, Path dir, TensorDescriptor x)
        throws Exception {
        TensorTransport consumer = TensorTransports.create(deployment(dir, "consumer"), false); // the hook closes it
        Runtime.getRuntime().addShutdownHook(new Thread(() -> { // the application's own cleanup: the JVM lives on
            try {
                Thread.sleep(300);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        OrtBridge bridge = new OrtBridge(env, consumer);
        OrtInput input = bridge.input(consumer.receive(x));
        System.out.println("READY");
        while (true) {
            try {
                bridge.run(session, Map.of("x", input)).close();
            } catch (IllegalStateException refusedAfterTheClose) {
                Thread.sleep(1000); // the hook is on its way: the JVM ends
            }
        }
    }
}
