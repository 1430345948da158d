package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.cuda.CudaProbe;
import io.mstar.transport.cuda.CudaStatus;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.staging.DeviceTensor;
import io.mstar.transport.staging.DeviceTransfers;
import io.mstar.transport.staging.StagedBatch;
import io.mstar.transport.staging.StagingRequest;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A decode step's staging: 64 requests of one 16 KiB tensor each, in one staging call or in 64 sends,
 * from host memory and from device memory (the device path needs {@code MSTAR_CUDART}: a GPU's runtime,
 * or the CPU stand-in the build makes, {@code target/native/libcudart-standin.so}). Each invocation ACKs
 * what it staged, so the arena never fills.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 7, time = 1)
@Fork(1)
public class StagingBenchmark {
    static final int REQUESTS = 64;
    static final int BYTES = 16 << 10;

    @Param({"host", "device"})
    public String memory;

    private Path dir;
    private ArenaTransport transport;
    private final List<StagingRequest<Tensor>> hostRequests = new ArrayList<>();
    private final List<StagingRequest<DeviceTensor>> deviceRequests = new ArrayList<>();
    private final List<Long> deviceBuffers = new ArrayList<>();
    private CudaStatus cuda;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-staging-");
        Map<String, String> env = new HashMap<>(System.getenv());
        env.put(TransportConfig.SHM_DIR, dir.toString());
        TransportConfig config = TransportConfig.from(env::get);
        transport = new ArenaTransport(config, new SegmentedArena(dir, Namespace.of(null, "staging"), "p", 64L << 20, 4),
            false);
        cuda = CudaProbe.probe(config);
        for (int i = 0; i < REQUESTS; i++) {
            hostRequests.add(new StagingRequest<>("request-" + i,
                List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[BYTES]), BYTES))));
            if (memory.equals("device")) {
                if (!cuda.usable()) {
                    throw new IllegalStateException("the device benchmarks need MSTAR_CUDART: " + cuda.reason());
                }
                long pointer = cuda.runtime().malloc(BYTES);
                deviceBuffers.add(pointer);
                deviceRequests.add(new StagingRequest<>("request-" + i,
                    List.of(new DeviceTensor(DType.U8, new long[] {BYTES}, pointer))));
            }
        }
    }

    @Benchmark
    public StagedBatch oneStagingCall() {
        StagedBatch staged = memory.equals("host") ? StagedBatch.stage(transport, hostRequests)
            : transport.capability(DeviceTransfers.class).orElseThrow().stageFromDevice(deviceRequests, false);
        staged.descriptors().forEach(this::ack);
        return staged;
    }

    @Benchmark
    public int aSendPerRequest() {
        int n = 0;
        for (int i = 0; i < REQUESTS; i++) {
            List<TensorDescriptor> sent = memory.equals("host")
                ? transport.send(hostRequests.get(i).requestId(), hostRequests.get(i).tensors())
                : transport.capability(DeviceTransfers.class).orElseThrow().sendFromDevice(deviceRequests.get(i).requestId(), deviceRequests.get(i).tensors());
            ack(sent);
            n += sent.size();
        }
        return n;
    }

    private void ack(List<TensorDescriptor> sent) {
        for (TensorDescriptor d : sent) {
            transport.ack(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits());
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        transport.close();
        deviceBuffers.forEach(p -> cuda.runtime().free(p));
        Files.delete(dir);
    }
}
