package io.mstar.transport.onnx;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import ai.onnxruntime.TensorInfo;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.examples.TinyModels;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.Buffer;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The adapter against the real ONNX Runtime (CPU build) and real transports in /dev/shm. */
class OrtBridgeTest {
    static final int IN = 8;
    static final int OUT = 16;
    static final int BATCH = 4;
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private final OrtEnvironment env = OrtEnvironment.getEnvironment();

    private Deployment arena(String entity) {
        return Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1")::get), "ep", entity);
    }

    /** A published tensor of {@code dtype} whose bytes count up from {@code seed}. */
    static TensorDescriptor publish(TensorTransport producer, DType dtype, long seed, long... shape) {
        try (TensorClaim claim = producer.claim("r", dtype, shape)) {
            MemorySegment m = claim.memory();
            for (long i = 0; i < m.byteSize(); i++) {
                m.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i));
            }
            return claim.publish();
        }
    }

    /** A published [BATCH, IN] float tensor of seeded values. */
    static TensorDescriptor publishInput(TensorTransport producer, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        try (TensorClaim claim = producer.claim("x", DType.F32, BATCH, IN)) {
            for (int i = 0; i < BATCH * IN; i++) {
                claim.memory().setAtIndex(FLOAT, i, (float) (random.nextDouble() * 2 - 1));
            }
            return claim.publish();
        }
    }

    @Test
    void everyDtypeOrtKnowsIsReadInPlace() throws Exception {
        EnumSet<DType> unsupported = EnumSet.of(DType.F8_E4M3FN, DType.F8_E5M2, DType.F8_E4M3FNUZ, DType.F8_E5M2FNUZ);
        try (TensorTransport producer = TensorTransports.create(arena("p"), false);
             TensorTransport consumer = TensorTransports.create(arena("c"), false)) {
            OrtBridge bridge = new OrtBridge(env, consumer);
            for (DType dtype : EnumSet.complementOf(unsupported)) {
                TensorDescriptor d = publish(producer, dtype, dtype.code(), 2, 3);
                try (OrtInput input = bridge.input(consumer.receive(d))) {
                    OnnxTensor tensor = input.tensor();
                    assertFalse(tensor.ownsBuffer(), dtype + ": ORT copied the bytes");
                    Buffer buffer = tensor.getBufferRef().orElseThrow();
                    assertTrue(buffer.isDirect(), dtype.toString());
                    assertEquals(consumerBytes(consumer, d).address(), MemorySegment.ofBuffer(buffer).address(),
                        dtype + ": ORT's tensor is not over the slot");
                    TensorInfo info = tensor.getInfo();
                    assertEquals(OrtBridge.ortType(dtype), info.type, dtype.toString());
                    assertArrayEquals(new long[]{2, 3}, info.getShape(), dtype.toString());
                }
                producer.ack(List.of(d.uuid()));
            }
            for (DType dtype : unsupported) {
                TensorDescriptor d = publish(producer, dtype, 1, 2, 3);
                ReceivedTensor received = consumer.receive(d);
                UnsupportedDTypeException e = assertThrows(UnsupportedDTypeException.class, () -> bridge.input(received));
                assertEquals(dtype, e.dtype());
                assertTrue(e.getMessage().contains(dtype.toString()), e.getMessage());
                assertThrows(IllegalStateException.class, received::data, "a refused input still closes the view");
                assertThrows(UnsupportedDTypeException.class, () -> bridge.output("r", dtype, 2, 3));
                producer.ack(List.of(d.uuid()));
            }
            assertEquals(0, consumer.statsSummary().inFlight(), "a refused output claims nothing");
        }
    }

    private static MemorySegment consumerBytes(TensorTransport consumer, TensorDescriptor d) {
        try (ReceivedTensor again = consumer.receive(d)) {
            return again.data();
        }
    }

    @Test
    void aStageReadsItsInputInPlaceAndOrtWritesItsOutputIntoAClaimedSlot() throws Exception {
        byte[] model = TinyModels.denseRelu(IN, OUT, 7);
        try (TensorTransport producer = TensorTransports.create(arena("p"), false);
             TensorTransport stage = TensorTransports.create(arena("s"), false);
             OrtSession session = env.createSession(model)) {
            OrtBridge bridge = new OrtBridge(env, stage);
            TensorDescriptor x = publishInput(producer, 1);
            float[][] expected = reference(session, stage, x);
            TensorDescriptor y;
            try (OrtInput input = bridge.input(stage.receive(x));
                 OrtOutput output = bridge.output("y", DType.F32, BATCH, OUT)) {
                bridge.run(session, Map.of("x", input), Map.of("y", output));
                assertFalse(output.tensor().isClosed(), "the run's result does not close a pinned output");
                for (int i = 0; i < BATCH * OUT; i++) {
                    assertEquals(expected[i / OUT][i % OUT], output.memory().getAtIndex(FLOAT, i), "element " + i);
                }
                y = output.publish();
                assertThrows(IllegalStateException.class, output::tensor);
            }
            producer.ack(List.of(x.uuid()));
            try (ReceivedTensor result = producer.receive(y)) {
                assertEquals(expected[BATCH - 1][OUT - 1], result.data().getAtIndex(FLOAT, BATCH * OUT - 1));
            }
            stage.ack(List.of(y.uuid()));
            assertEquals(0, producer.statsSummary().inFlight());
            assertEquals(0, stage.statsSummary().inFlight());
        }
    }

    // The same model the usual way: the input copied into a Java array, the output copied out of ORT.
    static float[][] reference(OrtSession session, TensorTransport consumer, TensorDescriptor x) throws Exception {
        float[][] in = new float[BATCH][IN];
        try (ReceivedTensor received = consumer.receive(x)) {
            for (int i = 0; i < BATCH * IN; i++) {
                in[i / IN][i % IN] = received.data().getAtIndex(FLOAT, i);
            }
        }
        try (OnnxTensor tensor = OnnxTensor.createTensor(OrtEnvironment.getEnvironment(), in);
             OrtSession.Result result = session.run(Map.of("x", tensor))) {
            return (float[][]) result.get(0).getValue();
        }
    }

    @Test
    void anOutputOverReadOnlyOrHeapMemoryIsRefusedBeforeOrtSeesIt() throws Exception {
        try (TensorTransport producer = TensorTransports.create(arena("p"), false);
             TensorTransport consumer = TensorTransports.create(arena("c"), false)) {
            OrtBridge bridge = new OrtBridge(env, consumer);
            TensorDescriptor d = publishInput(producer, 2);
            try (ReceivedTensor received = consumer.receive(d)) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> bridge.output(received.data(), DType.F32, BATCH, IN));
                assertTrue(e.getMessage().contains("read-only"), e.getMessage());
            }
            assertThrows(IllegalArgumentException.class,
                () -> bridge.output(MemorySegment.ofArray(new float[BATCH * IN]), DType.F32, BATCH, IN));
            producer.ack(List.of(d.uuid()));
        }
    }

    /**
     * Each misuse that would make ORT crash the JVM, in a child JVM (a crash there fails this test instead of
     * ending the test run): the child prints one REFUSED line per case when the adapter threw.
     */
    @Test
    void misuseThatWouldCrashTheJvmIsAnExceptionInstead() throws Exception {
        ChildJvm child = ChildJvm.start(false, OrtMisuse.class, shm.path().toString());
        int code = child.await(120);
        String out = child.output();
        String crash = child.crashReport();
        child.deleteLog();
        assertEquals(0, code, out + (crash == null ? "" : "\n" + crash));
        for (String misuse : OrtMisuse.CASES) {
            assertTrue(out.contains("REFUSED " + misuse + ": "), misuse + " was not refused:\n" + out);
        }
    }
}
