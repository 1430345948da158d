package io.mstar.transport.arena;

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
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A copy into a slot of a mapped shared segment against the same {@code MemorySegment.copy} between
 * two plain native segments (the reference, measured in the same run).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 7, time = 1)
@Fork(1)
public class CopyBenchmark {
    @Param({"4096", "65536", "1048576", "16777216"})
    public int bytes;

    private Arena scratch;
    private Path dir;
    private SegmentedArena arena;
    private MemorySegment source;
    private MemorySegment plainTarget;
    private MemorySegment slotTarget;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        scratch = Arena.ofShared();
        source = scratch.allocate(bytes, 4096);
        source.fill((byte) 7);
        plainTarget = scratch.allocate(bytes, 4096);
        plainTarget.fill((byte) 0);
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-bench-");
        arena = new SegmentedArena(dir, Namespace.of(null, "copy-benchmark"), "bench", 64L << 20, 1);
        long slot = arena.reserve(bytes);
        slotTarget = arena.slotMemory(slot, bytes);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        arena.close();
        Files.delete(dir);
        scratch.close();
    }

    @Benchmark
    public MemorySegment copyIntoSlot() {
        MemorySegment.copy(source, 0, slotTarget, 0, bytes);
        return slotTarget;
    }

    @Benchmark
    public MemorySegment plainCopy() {
        MemorySegment.copy(source, 0, plainTarget, 0, bytes);
        return plainTarget;
    }
}
