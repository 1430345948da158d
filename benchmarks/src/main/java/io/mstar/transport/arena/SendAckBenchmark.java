package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
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
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The producer's steady-state path in one process: send one tensor into the arena, then ACK it, through
 * the list API and through the allocation-free one. Run with {@code -prof gc} to see the bytes allocated
 * per tensor ({@code gc.alloc.rate.norm}).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class SendAckBenchmark {
    private static final ValueLayout.OfLong UUID_HALF =
        ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    @Param({"4096"})
    public int bytes;

    private Arena scratch;
    private Path dir;
    private ArenaTransport transport;
    private List<Tensor> tensor;
    private Tensor one;
    private MemorySegment descriptorBuffer;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        scratch = Arena.ofShared();
        MemorySegment data = scratch.allocate(bytes, 4096);
        one = Tensor.of(DType.U8, data, bytes);
        tensor = List.of(one);
        descriptorBuffer = scratch.allocate(DescriptorCodec.MAX_RECORD_BYTES);
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-bench-");
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString())::get);
        transport = new ArenaTransport(config, new SegmentedArena(dir, Namespace.of(null, "send-ack"), "bench", 64L << 20, 1), false);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        transport.close();
        Files.delete(dir);
        scratch.close();
    }

    /** The allocation-free path: the descriptor is written into a reused buffer, the ACK names the uuid's halves. */
    @Benchmark
    public int sendIntoThenAck() {
        int length = transport.records().sendInto("request", one, descriptorBuffer, 0);
        transport.ack(descriptorBuffer.get(UUID_HALF, 16), descriptorBuffer.get(UUID_HALF, 24));
        return length;
    }

    @Benchmark
    public TensorDescriptor sendThenAck() {
        TensorDescriptor d = transport.send("request", tensor).getFirst();
        transport.ack(List.of(d.uuid()));
        return d;
    }
}
