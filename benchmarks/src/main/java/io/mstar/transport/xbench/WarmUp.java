package io.mstar.transport.xbench;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * How fresh pairs warm up: the producers' {@code CURVE} lines (payloads/s per step since the first payload, with
 * {@code -Dxbench.curveMs=250 -Dxbench.warmUpS=0}) and both sides' {@code JIT} lines (their compiler threads' CPU
 * ticks at exit). Reports per peer and size the median rate of each step over the runs, the steady rate (the
 * median step of the run's last quarter), when a run first reached 0.8x of it, and the JIT ticks.
 */
final class WarmUp {
    private final Map<String, List<long[]>> curves = new LinkedHashMap<>(); // "peer size" -> per run: {ms, rates...}
    private final Map<String, List<Long>> jit = new LinkedHashMap<>(); // "peer side" -> ticks per run

    void take(String peer, String line) {
        String[] f = line.split(" ");
        if (line.startsWith("CURVE ")) {
            curves.computeIfAbsent(peer + " " + XBench.human(Long.parseLong(f[1])), k -> new ArrayList<>())
                .add(Arrays.stream(f, 2, f.length).mapToLong(Long::parseLong).toArray());
        } else if (line.startsWith("JIT ")) {
            jit.computeIfAbsent(peer + " " + f[1], k -> new ArrayList<>()).add(Long.parseLong(f[2]));
        }
    }

    void report(PrintStream out) {
        if (!jit.isEmpty()) {
            out.printf(Locale.ROOT, "%nJIT compiler threads' CPU ticks (1/100 s) per JVM, each run: %s%n", jit);
        }
        curves.forEach((cell, runs) -> {
            long ms = runs.getFirst()[0];
            int steps = runs.stream().mapToInt(r -> r.length - 1).min().orElse(0);
            StringBuilder medians = new StringBuilder();
            for (int k = 1; k <= steps; k++) {
                int step = k;
                medians.append(' ').append(median(runs.stream().mapToLong(r -> r[step]).toArray()) / 1000);
            }
            StringBuilder reached = new StringBuilder();
            for (long[] r : runs) {
                long steady = median(Arrays.copyOfRange(r, 1 + 3 * (r.length - 1) / 4, r.length));
                int first = 1;
                while (first < r.length && r[first] < 0.8 * steady) {
                    first++;
                }
                reached.append(String.format(Locale.ROOT, " %.2f s (steady %,d/s)", first * ms / 1000.0, steady));
            }
            out.printf(Locale.ROOT, "%nwarm-up %s: thousand payloads/s per %d ms, median of %d runs:%s%n"
                + "  0.8x of the run's steady rate (median of its last quarter) after the step ending at:%s%n",
                cell, ms, runs.size(), medians, reached);
        });
    }

    private static long median(long[] values) {
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted.length == 0 ? 0 : sorted[sorted.length / 2];
    }
}
