package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.PythonChild;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A JVM and a Python process on one arena (docs/format.md), real processes through real /dev/shm files: each way
 * 100,000 tensors of 4 KiB to 16 MiB, every word checked; a fan-out to one JVM and one Python consumer; and each
 * side killed with SIGKILL mid-stream, its peer told and its files reclaimed.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class PythonWorkersTest {
    private static final String DEPLOYMENT = "ipc:///tmp/mstar-python-test";
    private static final int TENSORS = Integer.getInteger("python.tensors", 100_000);
    private static final int KILLED_RUN = 100_000; // killed after its first 1,000: the rest cannot all be delivered

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @BeforeEach
    void venv() {
        PythonChild.assumeVenv();
    }

    private Map<String, String> env() {
        return Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "64", "PYTHONUNBUFFERED", "1");
    }

    private PythonChild python(String... args) throws Exception {
        PythonChild child = PythonChild.start(env(), "mstar_transport.worker", args);
        child.awaitOutput("READY", 60);
        return child;
    }

    private ChildJvm jvm(String... args) throws Exception {
        return ChildJvm.start(true, env(), PythonPeer.class, args);
    }

    @Test
    void aJvmProducerFeedsAPythonConsumerInPlace() throws Exception {
        PythonChild consumer = python("consume", DEPLOYMENT, "py", Integer.toString(TENSORS));
        ChildJvm producer = jvm("produce", DEPLOYMENT, "jvm", "py", Integer.toString(TENSORS), "7");
        assertEquals(0, producer.await(540), producer.output());
        assertEquals(0, consumer.await(60), consumer.output());
        assertTrue(consumer.output().contains("RESULT received=" + TENSORS + " bad=0 staleReads=0 badDescriptors=0"),
            consumer.output());
        System.out.println("JVM to Python: " + producer.result("delivered") + " delivered; python: "
            + consumer.output().lines().filter(l -> l.startsWith("RESULT")).findFirst().orElse(""));
        consumer.deleteLog();
        producer.deleteLog();
    }

    @Test
    void aPythonProducerFeedsAJvmConsumer() throws Exception {
        ChildJvm consumer = jvm("consume", DEPLOYMENT, "jvm", Integer.toString(TENSORS));
        awaitReady(consumer);
        PythonChild producer = python("produce", DEPLOYMENT, "py", "jvm", Integer.toString(TENSORS), "11");
        assertEquals(0, producer.await(540), producer.output());
        assertEquals(0, consumer.await(60), consumer.output());
        assertEquals(Integer.toString(TENSORS), consumer.result("received"), consumer.output());
        assertEquals("0", consumer.result("bad"), consumer.output());
        consumer.deleteLog();
        producer.deleteLog();
    }

    @Test
    void aFanOutReachesOneJvmAndOnePythonConsumer() throws Exception {
        int tensors = TENSORS / 10;
        PythonChild py = python("consume", DEPLOYMENT, "py", Integer.toString(tensors));
        ChildJvm jvmConsumer = jvm("consume", DEPLOYMENT, "jvm-consumer", Integer.toString(tensors));
        awaitReady(jvmConsumer);
        ChildJvm producer = jvm("produce", DEPLOYMENT, "jvm", "py,jvm-consumer", Integer.toString(tensors), "3");
        assertEquals(0, producer.await(540), producer.output());
        assertEquals(0, py.await(60), py.output());
        assertEquals(0, jvmConsumer.await(60), jvmConsumer.output());
        assertTrue(py.output().contains("RESULT received=" + tensors + " bad=0"), py.output());
        assertEquals("0", jvmConsumer.result("bad"), jvmConsumer.output());
        py.deleteLog();
        jvmConsumer.deleteLog();
        producer.deleteLog();
    }

    /**
     * A 0-d F32 tensor and a BF16 one, JVM to Python and back, as a Python stage echoes them: shape, dtype and bytes
     * intact both ways (a 0-d tensor once arrived in Python with shape (1,), and Python could not post BF16).
     */
    @Test
    void aZeroDimensionalAndABf16TensorRoundTripJvmToPythonToJvm() throws Exception {
        PythonChild echo = python("echo", DEPLOYMENT, "py", "jvm", "2");
        MemorySegment scalar = MemorySegment.ofArray(new float[] {3.5f});
        MemorySegment bf16 = MemorySegment.ofArray(new short[] {0x3f80, (short) 0xbf80, 0x4000, 0x0000, 0x7f80, 0x3e80});
        Map<String, String> back = new ConcurrentHashMap<>();
        try (TensorEndpoint jvm = TensorEndpoint.open(Deployment.of(TransportConfig.from(env()::get), DEPLOYMENT,
                 "jvm"))) {
            assertEquals(Delivery.Status.DELIVERED, jvm.send("py", "scalar", Tensor.of(DType.F32, scalar))
                .await(Duration.ofSeconds(60)));
            assertEquals(Delivery.Status.DELIVERED, jvm.send("py", "bf16", Tensor.of(DType.BF16, bf16, 2, 3))
                .await(Duration.ofSeconds(60)));
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (back.size() < 2 && System.nanoTime() < deadline) {
                jvm.receive(tensor -> {
                    long[] shape = new long[tensor.rank()];
                    for (int i = 0; i < shape.length; i++) {
                        shape[i] = tensor.dim(i);
                    }
                    MemorySegment sent = tensor.requestId().toString().equals("scalar") ? scalar : bf16;
                    back.put(tensor.requestId().toString(), tensor.dtype() + Arrays.toString(shape)
                        + (tensor.data().mismatch(sent) == -1 ? " intact" : " changed"));
                }, Duration.ofMillis(500));
            }
        }
        assertEquals(0, echo.await(60), echo.output());
        assertEquals(Map.of("scalar", "F32[] intact", "bf16", "BF16[2, 3] intact"), back, echo.output());
        echo.deleteLog();
    }

    /** A Python consumer killed mid-stream: the JVM producer is told for every tensor, and its files are swept. */
    @Test
    void aPythonConsumerKilledMidStreamIsReclaimedByItsJvmProducer() throws Exception {
        PythonChild consumer = python("consume", DEPLOYMENT, "py", Integer.toString(KILLED_RUN));
        ChildJvm producer = jvm("produce", DEPLOYMENT, "jvm", "py", Integer.toString(KILLED_RUN), "5");
        consumer.awaitOutput("PROGRESS", 120); // mid-stream: 1,000 received of KILLED_RUN
        consumer.process().destroyForcibly().waitFor(); // SIGKILL
        producer.await(180);
        String delivered = producer.result("delivered");
        String failed = producer.result("failed");
        assertEquals(KILLED_RUN, Long.parseLong(delivered) + Long.parseLong(failed), "every tensor told once:\n"
            + producer.output());
        assertTrue(Long.parseLong(failed) > 0, producer.output());
        assertTrue(producer.output().contains("CONSUMER_DIED") || producer.output().contains("REFUSED"),
            producer.output());
        List<String> left = Reclaimer.ourNames(shm.path()); // the producer's sweep may have removed them already
        String killed = "mstar_" + Namespace.of(null, DEPLOYMENT).id();
        assertTrue(left.stream().allMatch(n -> n.equals(killed + "_mailbox_py") || n.startsWith(killed + "_stats_py_")),
            "only the killed consumer's mailbox and stats file may be left: " + left);
        Reclaimer.sweep(shm.path()); // as the next sweep of any JVM of the deployment would
        consumer.deleteLog();
        producer.deleteLog();
    }

    /** A JVM consumer killed mid-stream: the Python producer tells every tensor and frees its slots. */
    @Test
    void aJvmConsumerKilledMidStreamIsToldToItsPythonProducer() throws Exception {
        ChildJvm consumer = jvm("consume", DEPLOYMENT, "jvm", Integer.toString(KILLED_RUN));
        awaitReady(consumer);
        PythonChild producer = python("produce", DEPLOYMENT, "py", "jvm", Integer.toString(KILLED_RUN), "13");
        awaitOutput(consumer, "PROGRESS"); // mid-stream: 1,000 received of KILLED_RUN
        consumer.process().destroyForcibly().waitFor();
        producer.await(180);
        String result = producer.output().lines().filter(l -> l.startsWith("RESULT")).findFirst().orElse("");
        assertTrue(result.contains("CONSUMER_DIED") || result.contains("REFUSED"), producer.output());
        long delivered = Long.parseLong(result.replaceAll(".*delivered=(\\d+).*", "$1"));
        long failed = Long.parseLong(result.replaceAll(".*failed=(\\d+).*", "$1"));
        assertEquals(KILLED_RUN, delivered + failed, "every tensor told once:\n" + producer.output());
        Reclaimer.sweep(shm.path()); // the killed consumer's mailbox
        consumer.deleteLog();
        producer.deleteLog();
    }

    private static void awaitReady(ChildJvm child) throws Exception {
        awaitOutput(child, "READY");
    }

    private static void awaitOutput(ChildJvm child, String text) throws Exception {
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (!child.output().contains(text)) {
            assertTrue(child.process().isAlive() && System.nanoTime() < deadline, child.output());
            Thread.sleep(20);
        }
    }
}
