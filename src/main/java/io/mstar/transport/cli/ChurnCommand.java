package io.mstar.transport.cli;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.lifecycle.ShmDirectory;
import io.mstar.transport.metrics.StatsJson;
import io.mstar.transport.naming.Namespace;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@code mstar-shm churn}: an arena in a temporary directory under {@code MSTAR_SHM_DIR}, driven like a
 * producer whose consumer ACKs roughly in order: reserve, copy the tensor in, and free the oldest slots
 * once a window of in-flight tensors is full. Prints progress each second on a terminal, then the final
 * snapshot and the segments' occupancy map (or, with {@code --json}, one JSON object).
 */
final class ChurnCommand {
    private static final int IN_FLIGHT = 64;
    private static final long MIN_TENSOR = 4 << 10;
    private static final long MAX_TENSOR = 16 << 20;

    private ChurnCommand() {
    }

    static int run(String[] args, PrintStream out) {
        double seconds = 3;
        int segmentMb = 64;
        int maxSegments = 4;
        boolean json = false;
        for (int i = 0; i < args.length; i += 2) {
            if (args[i].equals("--json")) {
                json = true;
                i--;
                continue;
            }
            switch (args[i]) {
                case "--seconds" -> seconds = MstarShm.number(args, i);
                case "--segment-mb" -> segmentMb = (int) MstarShm.number(args, i);
                case "--max-segments" -> maxSegments = (int) MstarShm.number(args, i);
                default -> throw new MstarShm.UsageException("unknown option for churn: " + args[i]);
            }
        }
        TransportConfig config = TransportConfig.fromEnvironment();
        Path dir;
        try {
            dir = Files.createTempDirectory(ShmDirectory.prepare(config.shmDir()), "mstar-churn-");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary directory in " + config.shmDir(), e);
        }
        if (!json) {
            out.printf("churn: dir=%s segmentMb=%d maxSegments=%d seconds=%.1f in-flight=%d sizes=4KiB..16MiB%n",
                dir, segmentMb, maxSegments, seconds, IN_FLIGHT);
        }
        try (Arena scratch = Arena.ofConfined();
             SegmentedArena arena = new SegmentedArena(dir, Namespace.of(config.deploymentToken(), "mstar-shm-churn"),
                 "churn", (long) segmentMb << 20, maxSegments)) {
            MemorySegment source = scratch.allocate(MAX_TENSOR, 4096);
            source.fill((byte) 0x5A);
            String done = churn(arena, source, (long) (seconds * 1e9), out, !json && Terminal.showsProgress(out));
            String map = arena.occupancyMap(64); // at its fullest: the last window is still in flight
            ArenaStats stats = arena.stats();
            if (json) {
                out.println("{\"durationUnit\":" + Json.quote(StatsJson.DURATION_UNIT) + "," + Json.members(done)
                    + ",\"stats\":" + StatsJson.of(stats) + ",\"segmentMap\":" + Json.strings(List.of(map.split(","))) + "}");
            } else {
                out.println("done: " + done);
                out.println("stats: " + stats.toLogLine());
                out.println("segments with the last window of tensors in flight:");
                out.println(StatsCommand.drawMap(map));
            }
        } finally {
            try {
                Files.deleteIfExists(dir);
            } catch (IOException e) {
                out.println("warning: could not remove " + dir + ": " + e);
            }
        }
        return 0;
    }

    // Returns the totals as key=value pairs; leaves the last window of tensors in flight, freed by the close.
    private static String churn(SegmentedArena arena, MemorySegment source, long durationNs, PrintStream out,
                                boolean progress) {
        SplittableRandom random = new SplittableRandom(1);
        ArrayDeque<long[]> inFlight = new ArrayDeque<>();
        long start = System.nanoTime();
        long nextReport = start + 1_000_000_000L;
        long tensors = 0;
        long bytes = 0;
        long full = 0;
        while (System.nanoTime() - start < durationNs) {
            long size = lognormalSize(random);
            long slot = arena.reserve(size);
            if (slot == SegmentedArena.FULL) {
                full++;
                // Plays the consumer: ACK the oldest tensor and retry.
                if (!inFlight.isEmpty()) {
                    arena.free(inFlight.removeFirst()[0]);
                }
                continue;
            }
            MemorySegment.copy(source, 0, arena.slotMemory(slot, size), 0, size);
            inFlight.addLast(new long[] {slot});
            tensors++;
            bytes += size;
            while (inFlight.size() > IN_FLIGHT || (inFlight.size() > 1 && random.nextInt(8) == 0)) {
                // Roughly FIFO: mostly the oldest, sometimes the second oldest.
                long[] victim = random.nextInt(4) == 0 && inFlight.size() > 1 ? secondOldest(inFlight) : inFlight.removeFirst();
                arena.free(victim[0]);
            }
            long now = System.nanoTime();
            if (progress && now >= nextReport) {
                ArenaStats s = arena.stats();
                out.printf("  %4.1fs tensors=%d copied=%.2f GB full=%d segments=%d used=%d MiB largestFree=%d MiB"
                        + " fragmentation=%.3f%n", (now - start) / 1e9, tensors, bytes / 1e9, full, s.segments(),
                    s.usedBytes() >> 20, s.largestFreeBlockBytes() >> 20, s.fragmentation());
                nextReport += 1_000_000_000L;
            }
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        return String.format(Locale.ROOT, "tensors=%d seconds=%.2f tensorsPerSecond=%.0f copiedGBPerSecond=%.2f"
            + " fullOutcomes=%d", tensors, elapsed, tensors / elapsed, bytes / elapsed / 1e9, full);
    }

    private static long[] secondOldest(ArrayDeque<long[]> queue) {
        long[] first = queue.removeFirst();
        long[] second = queue.removeFirst();
        queue.addFirst(first);
        return second;
    }

    // Lognormal around 256 KiB, clamped to 4 KiB..16 MiB; one in ten is a repeated 1 MiB tensor.
    private static long lognormalSize(SplittableRandom random) {
        if (random.nextInt(10) == 0) {
            return 1 << 20;
        }
        double size = Math.exp(Math.log(256 << 10) + 1.5 * gaussian(random));
        return Math.max(MIN_TENSOR, Math.min(MAX_TENSOR, (long) size));
    }

    private static double gaussian(SplittableRandom random) {
        return Math.sqrt(-2 * Math.log(1 - random.nextDouble())) * Math.cos(2 * Math.PI * random.nextDouble());
    }
}
