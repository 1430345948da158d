package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.naming.Namespace;
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
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The first send of a freshly opened arena transport (one 4 KiB tensor, 64 MiB segments): what the first
 * request of a worker pays. Each iteration opens a new transport and times its first send alone, with the
 * first segment made ahead ({@code prepared=true}: {@code prepareToSend()} at open) or by the send itself.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 5, batchSize = 1)
@Measurement(iterations = 20, batchSize = 1)
@Fork(1)
public class FirstSendBenchmark {
    private Path dir;
    private ArenaTransport transport;
    private final Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096);

    @Param({"true", "false"})
    public boolean prepared;

    @Setup(Level.Trial)
    public void directory() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-first-send-");
    }

    @Setup(Level.Iteration)
    public void open() {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString())::get);
        transport = new ArenaTransport(config, new SegmentedArena(dir, Namespace.of(null, "first-send"), "p", 64L << 20,
            4), false);
        if (prepared) {
            transport.prepareToSend();
        }
    }

    @Benchmark
    public List<TensorDescriptor> firstSend() {
        return transport.send("r", List.of(tensor));
    }

    @TearDown(Level.Iteration)
    public void close() {
        transport.close();
    }

    @TearDown(Level.Trial)
    public void removeDirectory() throws IOException {
        Files.delete(dir);
    }
}
