package io.mstar.transport.cuda;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.shm.SlotStamp;
import io.mstar.transport.staging.DeviceTensor;
import io.mstar.transport.staging.DeviceTransfers;
import io.mstar.transport.staging.StagedBatch;
import io.mstar.transport.staging.StagingRequest;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Device tensors through the arena, proven on the CPU stand-in: its copies run late (a configurable
 * delay) on a worker thread, so any missing gate shows up as stale bytes.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class DeviceTransportTest {
    private static final Namespace NS = Namespace.of(null, "device-test");
    private static final StandinControl STANDIN = StandinControl.INSTANCE;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private final CudaRuntime cuda = CudaProbe.probe(System.getenv("MSTAR_CUDART")).runtime();
    private final List<Long> allocations = new ArrayList<>();

    @AfterEach
    void cleanUp() {
        STANDIN.mstarStandinSetCopyDelayUs(0);
        allocations.forEach(cuda::free);
    }

    private TransportConfig config(String... pairs) {
        Map<String, String> env = new HashMap<>();
        env.put(TransportConfig.SHM_DIR, shm.path().toString());
        env.put(TransportConfig.CUDART, System.getenv("MSTAR_CUDART"));
        for (int i = 0; i < pairs.length; i += 2) {
            env.put(pairs[i], pairs[i + 1]);
        }
        return TransportConfig.from(env::get);
    }

    private ArenaTransport transport(TransportConfig config, String entity, long segmentBytes, int maxSegments) {
        return new ArenaTransport(config, new SegmentedArena(shm.path(), NS, entity, segmentBytes, maxSegments), false);
    }

    /** "Device memory" of the stand-in, filled with a pattern derived from {@code seed}. */
    private long deviceBuffer(long bytes, int seed) {
        long pointer = cuda.malloc(bytes);
        allocations.add(pointer);
        MemorySegment memory = MemorySegment.ofAddress(pointer).reinterpret(bytes);
        for (long i = 0; i < bytes; i++) {
            memory.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 31));
        }
        return pointer;
    }

    private static boolean holdsPattern(MemorySegment memory, int seed) {
        for (long i = 0; i < memory.byteSize(); i++) {
            if (memory.get(ValueLayout.JAVA_BYTE, i) != (byte) (seed + i * 31)) {
                return false;
            }
        }
        return true;
    }

    /** 64 requests of one tensor each: one default-stream wait and one copy wait for all, or none when skipped. */
    @Test
    void stagingManyRequestsWaitsOnceAndGivesTheSameBytesAsPerRequestSends() {
        try (ArenaTransport producer = transport(config(), "p", 1 << 20, 4);
             ArenaTransport consumer = transport(config(), "c", 1 << 20, 1)) {
            List<StagingRequest<DeviceTensor>> requests = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                requests.add(new StagingRequest<>("request-" + i,
                    List.of(new DeviceTensor(DType.F16, new long[] {64, 64}, deviceBuffer(8192, i)))));
            }
            long waits = STANDIN.mstarStandinEventSyncs();
            long defaultSyncs = STANDIN.mstarStandinDefaultStreamSyncs();
            StagedBatch staged = producer.capability(DeviceTransfers.class).orElseThrow().stageFromDevice(requests, false);
            assertEquals(1, STANDIN.mstarStandinEventSyncs() - waits, "one copy wait for 64 requests");
            assertEquals(1, STANDIN.mstarStandinDefaultStreamSyncs() - defaultSyncs, "one default-stream sync");

            List<TensorDescriptor> perRequest = new ArrayList<>();
            for (StagingRequest<DeviceTensor> r : requests) {
                perRequest.addAll(producer.capability(DeviceTransfers.class).orElseThrow().sendFromDevice(r.requestId(), r.tensors()));
            }
            assertEquals(64, STANDIN.mstarStandinEventSyncs() - waits - 1, "per-request sends wait once each");

            StagedBatch skipped = producer.capability(DeviceTransfers.class).orElseThrow().stageFromDevice(requests.subList(0, 2), true);
            assertEquals(65, STANDIN.mstarStandinDefaultStreamSyncs() - defaultSyncs, "a synchronised caller skips it");

            for (int i = 0; i < 64; i++) {
                TensorDescriptor d = staged.descriptors().get(i).getFirst();
                assertEquals("request-" + i, d.requestId());
                assertEquals(d.fileName(), staged.segmentNames().get(staged.segmentIndex()[i]), "the columns say the same");
                assertEquals(d.offset(), staged.offset()[i]);
                try (ReceivedTensor a = consumer.receive(d); ReceivedTensor b = consumer.receive(perRequest.get(i))) {
                    assertEquals(-1, a.data().mismatch(b.data()), "the same bytes as the per-request send");
                    assertTrue(holdsPattern(a.data(), i));
                }
            }
            staged.descriptors().forEach(ds -> producer.ack(ds.stream().map(TensorDescriptor::uuid).toList()));
            skipped.descriptors().forEach(ds -> producer.ack(ds.stream().map(TensorDescriptor::uuid).toList()));
            producer.ack(perRequest.stream().map(TensorDescriptor::uuid).toList());
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void noDescriptorIsReturnedBeforeItsDeviceToHostCopyLanded() {
        try (ArenaTransport producer = transport(config(), "p", 1 << 20, 2);
             ArenaTransport consumer = transport(config(), "c", 1 << 20, 1)) {
            List<DeviceTensor> batch = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                batch.add(new DeviceTensor(DType.F16, new long[] {64, 32}, deviceBuffer(4096, i)));
            }
            STANDIN.mstarStandinSetCopyDelayUs(20_000);
            long syncsBefore = STANDIN.mstarStandinEventSyncs();
            List<TensorDescriptor> sent = producer.capability(DeviceTransfers.class).orElseThrow().sendFromDevice("r", batch);
            assertEquals(1, STANDIN.mstarStandinEventSyncs() - syncsBefore, "one host wait for the whole batch");
            assertEquals(STANDIN.mstarStandinCopiesStarted(), STANDIN.mstarStandinCopiesDone(), "no copy pending");
            for (int i = 0; i < sent.size(); i++) {
                try (ReceivedTensor in = consumer.receive(sent.get(i))) {
                    assertTrue(holdsPattern(in.data(), i), "tensor " + i + " landed before its descriptor was returned");
                }
            }
            producer.ack(sent.stream().map(TensorDescriptor::uuid).toList());
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void noAckBeforeItsHostToDeviceCopyLanded() {
        try (ArenaTransport producer = transport(config(), "p", 1 << 20, 1);
             ArenaTransport consumer = transport(config(), "c", 1 << 20, 1)) {
            long source = deviceBuffer(8192, 5);
            TensorDescriptor d = producer.capability(DeviceTransfers.class).orElseThrow().sendFromDevice("r", List.of(new DeviceTensor(DType.U8, new long[] {8192}, source)))
                .getFirst();
            long target = cuda.malloc(8192);
            allocations.add(target);
            MemorySegment.ofAddress(target).reinterpret(8192).fill((byte) 0);
            STANDIN.mstarStandinSetCopyDelayUs(200_000);
            AtomicBoolean landedAtAck = new AtomicBoolean();
            CompletableFuture<Void> acked = consumer.capability(DeviceTransfers.class).orElseThrow().copyToDevice(d, target).thenAccept(done -> {
                landedAtAck.set(holdsPattern(MemorySegment.ofAddress(target).reinterpret(8192), 5));
                producer.ack(List.of(done.uuid()));
            });
            assertFalse(acked.isDone(), "the copy is still in flight");
            acked.join();
            assertTrue(landedAtAck.get(), "the ACK ran before the host-to-device copy landed");
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void aSlotIsNotReusedWhileACopyOutOfItIsPending() throws Exception {
        // One segment that holds one tensor; the second send waits for the first one's ACK.
        TransportConfig waiting = config(TransportConfig.SPILL_AFTER_S, "10");
        int n = (64 << 10) - SlotStamp.STAMP_BYTES; // the tensor and its stamp fill the segment
        try (ArenaTransport producer = transport(waiting, "p", 64 << 10, 1);
             ArenaTransport consumer = transport(config(), "c", 64 << 10, 1)) {
            Tensor first = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[n]).fill((byte) 1), n);
            Tensor second = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[n]).fill((byte) 2), n);
            TensorDescriptor d1 = producer.send("r", List.of(first)).getFirst();
            long target = cuda.malloc(64 << 10);
            allocations.add(target);
            STANDIN.mstarStandinSetCopyDelayUs(300_000);
            CompletableFuture<Void> acked = consumer.capability(DeviceTransfers.class).orElseThrow().copyToDevice(d1, target)
                .thenAccept(done -> producer.ack(List.of(done.uuid())));
            Thread sender = Thread.ofPlatform().start(() -> producer.send("r", List.of(second)));
            acked.join();
            sender.join();
            MemorySegment landed = MemorySegment.ofAddress(target).reinterpret(64 << 10);
            assertEquals(1, landed.get(ValueLayout.JAVA_BYTE, 0), "the device got the first tensor, not the second");
            assertEquals(1, landed.get(ValueLayout.JAVA_BYTE, n - 1));
            TransportStats stats = producer.statsSummary();
            assertEquals(1, stats.backpressureWaits(), "the second send waited for the ACK");
            assertEquals(0, stats.spills());
        }
    }

    @Test
    void segmentsArePinnedWithinTheBudgetAndUnregisteredBeforeUnmapping() {
        long rangesBefore = STANDIN.mstarStandinRegisteredRanges();
        // Budget of 2 MiB: two of the three 1 MiB segments get pinned, the third stays pageable.
        try (ArenaTransport producer = transport(config(TransportConfig.PIN_MAX_MB, "2"), "p", 1 << 20, 3)) {
            List<Tensor> three = new ArrayList<>();
            int n = (1 << 20) - SlotStamp.STAMP_BYTES; // the tensor and its stamp fill a segment
            for (int i = 0; i < 3; i++) {
                three.add(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[n]), n));
            }
            List<TensorDescriptor> sent = producer.send("r", three);
            assertEquals(0, producer.statsSummary().pinnedSegments(), "nothing is pinned before the first device call");
            List<TensorDescriptor> fromDevice = producer.capability(DeviceTransfers.class).orElseThrow().sendFromDevice("r", List.of(
                new DeviceTensor(DType.U8, new long[] {16}, deviceBuffer(16, 1))));
            TransportStats stats = producer.statsSummary();
            assertEquals(2, stats.pinnedSegments());
            assertEquals(2 << 20, stats.pinnedBytes());
            assertEquals("ok", stats.cuda());
            assertEquals(rangesBefore + 2, STANDIN.mstarStandinRegisteredRanges());
            producer.ack(sent.stream().map(TensorDescriptor::uuid).toList());
            producer.ack(List.of(fromDevice.getFirst().uuid()));
        }
        assertEquals(rangesBefore, STANDIN.mstarStandinRegisteredRanges(), "every range unregistered at close");

        try (ArenaTransport unpinned = transport(config(TransportConfig.PIN, "0"), "q", 1 << 20, 1)) {
            TensorDescriptor d = unpinned.capability(DeviceTransfers.class).orElseThrow().sendFromDevice("r", List.of(new DeviceTensor(DType.U8, new long[] {16},
                deviceBuffer(16, 2)))).getFirst();
            assertEquals(0, unpinned.statsSummary().pinnedSegments(), "MSTAR_SHM_ARENA_PIN=0");
            unpinned.ack(List.of(d.uuid()));
        }
    }

    /** In a child JVM bound to this machine's real libcudart: host tensors work, device ones are refused with the reason. */
    @Test
    void withoutUsableCudaHostTensorsWorkAndDeviceTensorsAreRefusedWithTheReason() throws Exception {
        Path real = Path.of("/usr/local/cuda/lib64/libcudart.so");
        Assumptions.assumeTrue(Files.exists(real)
            && !Files.exists(Path.of("/dev/nvidiactl")),
            "SKIPPED: needs the CUDA toolkit without a GPU driver (this checks the refusal)");
        ChildJvm child = ChildJvm.start(true, Map.of("MSTAR_CUDART", real.toString()), NoCudaMain.class,
            shm.path().toString());
        int code = child.await(60);
        String out = child.output();
        child.deleteLog();
        assertEquals(0, code, out);
        assertTrue(out.contains("host=ok"), out);
        assertTrue(out.contains("refused=device tensors need a usable CUDA runtime: cudaErrorInsufficientDriver (35)"), out);
    }

    /** Child JVM: an AUTO transport on a machine whose CUDA cannot run. */
    public static final class NoCudaMain {
        public static void main(String[] args) {
            Map<String, String> env = Map.of(TransportConfig.SHM_DIR, args[0], TransportConfig.ARENA, "AUTO",
                TransportConfig.SEGMENT_MB, "1", TransportConfig.MAX_SEGMENTS, "1");
            try (var transport = TensorTransports.create(Deployment.of(TransportConfig.from(env::get), "e", "p"), false)) {
                TensorDescriptor d = transport.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[10]), 10)))
                    .getFirst();
                transport.ack(List.of(d.uuid()));
                System.out.println("host=ok");
                try {
                    transport.capability(DeviceTransfers.class).orElseThrow().sendFromDevice("r", List.of(new DeviceTensor(DType.U8, new long[] {1}, 4096)));
                } catch (IllegalStateException e) {
                    System.out.println("refused=" + e.getMessage());
                }
            }
        }
    }
}
