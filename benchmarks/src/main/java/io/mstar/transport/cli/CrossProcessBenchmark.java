package io.mstar.transport.cli;

import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Cross-process send, receive, ACK: a producer process and a consumer process (the demo's), through the
 * arena and through the file transport, against one plain memcpy of the same bytes (the physical limit:
 * one copy in, zero copies out), all in one run. Repeats rounds and prints medians and min..max.
 *
 * <pre>
 *   mvn -q test-compile exec:exec@xbench [-Dxbench.args="ROUNDS SECONDS_PER_SIZE [BATCH]"]
 * </pre>
 */
public final class CrossProcessBenchmark {
    private CrossProcessBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        double secondsPerSize = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        int batch = args.length > 2 ? Integer.parseInt(args[2]) : DemoCommand.BATCH;
        PrintStream out = System.out;
        // A demo directory: locked while this run lives, swept (with what its children left) once it is gone.
        OwnedFile workDir = OwnedFile.createDirectory(Path.of("/dev/shm"), "mstar-demo-" + Owner.newNonce());
        Path dir = Path.of(workDir.path());
        Map<String, Map<Long, List<double[]>>> results = new HashMap<>();
        try {
            for (int r = 1; r <= rounds; r++) {
                for (String mode : List.of("arena", "file")) {
                    Map<Long, double[]> round = DemoCommand.round(dir, mode, secondsPerSize, batch, new PrintStream(PrintStream.nullOutputStream()), new String[1]);
                    if (round == null) {
                        throw new IllegalStateException("round " + r + " of " + mode + " failed");
                    }
                    round.forEach((size, row) -> results.computeIfAbsent(mode, m -> new HashMap<>())
                        .computeIfAbsent(size, s -> new ArrayList<>()).add(row));
                }
                results.computeIfAbsent("memcpy", m -> new HashMap<>());
                for (long size : DemoCommand.SIZES) {
                    results.get("memcpy").computeIfAbsent(size, s -> new ArrayList<>()).add(memcpy(size, secondsPerSize));
                }
                out.println("round " + r + " of " + rounds + " done");
            }
        } finally {
            workDir.close();
        }
        out.println();
        out.println("tensors/s and GB/s per size: median (min..max) over " + rounds + " rounds, up to " + batch
            + " tensors per send");
        out.printf("%-6s | %-28s | %-28s | %-28s | %-10s | %s%n", "size", "arena tensors/s", "file tensors/s",
            "memcpy tensors/s", "arena/file", "arena GB/s / memcpy GB/s");
        for (long size : DemoCommand.SIZES) {
            double[] arena = stats(results.get("arena").get(size), 0);
            double[] file = stats(results.get("file").get(size), 0);
            double[] copy = stats(results.get("memcpy").get(size), 0);
            double[] arenaGb = stats(results.get("arena").get(size), 1);
            double[] copyGb = stats(results.get("memcpy").get(size), 1);
            out.printf(Locale.ROOT, "%-6s | %-28s | %-28s | %-28s | %-10s | %.2f (arena %.2f GB/s, memcpy %.2f GB/s)%n",
                DemoCommand.human(size), fmt(arena), fmt(file), fmt(copy),
                String.format(Locale.ROOT, "%.1fx", arena[0] / file[0]), arenaGb[0] / copyGb[0], arenaGb[0], copyGb[0]);
        }
    }

    // One plain copy of `size` bytes between two native buffers, repeated for the given time: {tensors/s, GB/s}.
    private static double[] memcpy(long size, double seconds) {
        try (Arena arena = Arena.ofConfined()) {
            // Rotate over 256 MiB of targets so large copies are not served from cache, like fresh slots.
            int copies = (int) Math.max(1, (256L << 20) / size);
            MemorySegment source = arena.allocate(size, 4096);
            source.fill((byte) 1);
            MemorySegment targets = arena.allocate(size * copies, 4096);
            targets.fill((byte) 0);
            long start = System.nanoTime();
            long n = 0;
            while (System.nanoTime() - start < seconds * 1e9) {
                MemorySegment.copy(source, 0, targets, (n++ % copies) * size, size);
            }
            double elapsed = (System.nanoTime() - start) / 1e9;
            return new double[] {n / elapsed, n * size / elapsed / 1e9};
        }
    }

    private static double[] stats(List<double[]> rows, int column) {
        double[] values = rows.stream().mapToDouble(r -> r[column]).sorted().toArray();
        int n = values.length;
        double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
        return new double[] {median, values[0], values[n - 1]};
    }

    private static String fmt(double[] s) {
        return String.format(Locale.ROOT, "%.0f (%.0f..%.0f)", s[0], s[1], s[2]);
    }
}
