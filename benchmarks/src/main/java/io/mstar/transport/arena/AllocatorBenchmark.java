package io.mstar.transport.arena;

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

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * One reserve+free pair per operation on a churn trace, at a steady number of live blocks, for our
 * B+ tree first fit and for the sorted-list first fit (the M* algorithm) on the same trace.
 *
 * <p>The trace: sizes mostly lognormal between 4 KiB and 16 MiB with a few repeated sizes; frees roughly
 * FIFO with jitter (the oldest few blocks, in random order), and 2% long-lived stragglers that are
 * freed only rarely. Capacity is twice the mean live bytes, so the arena is about half full.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 7, time = 1)
@Fork(1)
public class AllocatorBenchmark {
    private static final int TRACE = 1 << 20;

    @Param({"1000", "10000", "100000"})
    public int liveBlocks;

    @Param({"bplusTree", "sortedList"})
    public String allocator;

    private final int[] sizes = new int[TRACE];
    private final int[] victims = new int[TRACE];
    private long[] live;
    private Allocator target;
    private int step;
    private long fullOutcomes;

    /** The two allocators behind one call site (each fork runs one, so it stays monomorphic). */
    private interface Allocator {
        long reserve(long bytes);

        void free(long offset);
    }

    @Setup(Level.Trial)
    public void setUp() {
        SplittableRandom random = new SplittableRandom(2026);
        long totalBytes = 0;
        for (int i = 0; i < TRACE; i++) {
            sizes[i] = size(random);
            totalBytes += sizes[i];
        }
        int stragglers = liveBlocks / 50;
        int cursor = 0;
        for (int i = 0; i < TRACE; i++) {
            if (random.nextInt(200) == 0) {
                victims[i] = random.nextInt(stragglers);
            } else {
                int ring = liveBlocks - stragglers;
                victims[i] = stragglers + (cursor + random.nextInt(16)) % ring;
                cursor = (cursor + 1) % ring;
            }
        }
        long meanBytes = totalBytes / TRACE;
        long capacity = Math.min(FirstFitAllocator.MAX_CAPACITY_BYTES, 2 * liveBlocks * meanBytes / 256 * 256);
        if (allocator.equals("bplusTree")) {
            FirstFitAllocator ours = new FirstFitAllocator(capacity);
            target = new Allocator() {
                public long reserve(long bytes) {
                    return ours.reserve(bytes);
                }

                public void free(long offset) {
                    ours.free(offset);
                }
            };
        } else {
            SortedListFirstFit reference = new SortedListFirstFit(capacity);
            target = new Allocator() {
                public long reserve(long bytes) {
                    return reference.reserve(bytes);
                }

                public void free(long offset) {
                    reference.free(offset);
                }
            };
        }
        live = new long[liveBlocks];
        for (int p = 0; p < liveBlocks; p++) {
            live[p] = target.reserve(sizes[p]);
        }
        // Run the trace once so measurement starts from a churned (fragmented) steady state.
        for (int i = 0; i < TRACE; i++) {
            reserveFreePair();
        }
        fullOutcomes = 0;
    }

    @TearDown(Level.Trial)
    public void check() {
        if (fullOutcomes > 0) {
            System.out.println("warning: " + fullOutcomes + " reserves found the allocator full");
        }
    }

    @Benchmark
    public long reserveFreePair() {
        int i = step++ & (TRACE - 1);
        int p = victims[i];
        long old = live[p];
        if (old >= 0) {
            target.free(old);
        }
        long offset = target.reserve(sizes[i]);
        if (offset < 0) {
            fullOutcomes++;
        }
        live[p] = offset;
        return offset;
    }

    // Lognormal around 64 KiB (sigma 1.5) clamped to 4 KiB..16 MiB; one in eight is a repeated size.
    private static int size(SplittableRandom random) {
        if (random.nextInt(8) == 0) {
            int[] repeated = {4096, 65536, 1 << 20, 3 << 20};
            return repeated[random.nextInt(repeated.length)];
        }
        double gaussian = Math.sqrt(-2 * Math.log(1 - random.nextDouble())) * Math.cos(2 * Math.PI * random.nextDouble());
        double size = Math.exp(Math.log(64 << 10) + 1.5 * gaussian);
        return (int) Math.max(4 << 10, Math.min(16 << 20, size));
    }
}
