package io.mstar.transport.lifecycle;

import io.mstar.transport.naming.Namespace;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * The cost of a sweep per file ({@value #FILES} files): every file held by a live owner (what a periodic
 * sweep of a healthy directory pays), and every file dead (a sweep that removes them all).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 7, time = 1)
@Fork(1)
public class SweepBenchmark {
    static final int FILES = 1000;

    @Param({"live", "dead"})
    public String owners;

    private Path dir;
    private Owner owner;
    private final List<OwnedFile> held = new ArrayList<>();

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-sweep-bench-");
        owner = Owner.create(dir, Namespace.of(null, "sweep-bench"), "bench");
        if (owners.equals("live")) {
            for (int i = 0; i < FILES; i++) {
                held.add(OwnedFile.create(dir, owner.spillName(UUID.randomUUID())));
            }
        }
    }

    @Setup(Level.Invocation)
    public void deadFiles() throws IOException {
        if (owners.equals("dead")) {
            for (int i = 0; i < FILES; i++) {
                Files.createFile(dir.resolve(owner.spillName(UUID.randomUUID()))); // nobody holds them
            }
        }
    }

    @Benchmark
    @OperationsPerInvocation(FILES)
    public List<Reclaimer.Removed> sweep() {
        return Reclaimer.sweep(dir);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        held.forEach(OwnedFile::close);
        Reclaimer.sweep(dir);
        Files.delete(dir);
    }
}
