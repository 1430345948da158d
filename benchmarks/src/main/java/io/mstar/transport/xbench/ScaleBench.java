package io.mstar.transport.xbench;

import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The scale benchmark: many worker processes on one node, each a fresh JVM ({@link ScalePeer}). Shapes:
 * {@code fanin}, N producers into one consumer; {@code fanout}, one producer to M consumers in turn. For each
 * shape, size and count, RUNS runs of SECONDS measured (after a warm-up) by every producer at once; reported per
 * cell: the aggregate GB/s (median and min..max over the runs), the worst producer's p99 send-to-outcome, and
 * both against one pair's. Every payload is checked; a wrong one fails the run.
 *
 * <pre>
 *   mvn -q test-compile exec:exec@scale [-Dscale.args="RUNS SECONDS SHAPES SIZES COUNTS"]
 *   e.g. -Dscale.args="3 2 fanin,fanout 4096,65536,1048576 1,2,4,8,16"
 * </pre>
 */
public final class ScaleBench {
    private ScaleBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("child")) {
            child(args);
            return;
        }
        int runs = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 2;
        List<String> shapes = List.of((args.length > 2 ? args[2] : "fanin,fanout").split(","));
        long[] sizes = Arrays.stream((args.length > 3 ? args[3] : "4096,1048576").split(",")).mapToLong(Long::parseLong)
            .toArray();
        int[] counts = Arrays.stream((args.length > 4 ? args[4] : "1,2,4,8,16").split(",")).mapToInt(Integer::parseInt)
            .toArray();
        Map<String, List<double[]>> cells = new LinkedHashMap<>(); // "shape size count" -> {GB/s, worst p99 us}
        long bad = 0;
        OwnedFile workDir = OwnedFile.createDirectory(Path.of("/dev/shm"), "mstar-demo-" + Owner.newNonce());
        try {
            for (int run = 1; run <= runs; run++) {
                for (String shape : shapes) {
                    for (long size : sizes) {
                        for (int n : counts) {
                            Path dir = Files.createDirectories(Path.of(workDir.path(), shape + "-" + size + "-" + n + "-"
                                + run));
                            double[] cell = new double[3];
                            bad += cell(shape, size, n, seconds, dir, cell);
                            cells.computeIfAbsent(shape + " " + size + " " + n, k -> new ArrayList<>()).add(cell);
                            System.out.printf(Locale.ROOT, "run %d %s %s x%d: %.3f GB/s, worst p99 %.0f us%n", run, shape,
                                XBench.human(size), n, cell[0], cell[1]);
                            XBench.deleteTree(dir);
                        }
                    }
                }
            }
        } finally {
            XBench.deleteTree(Path.of(workDir.path()));
            workDir.close();
        }
        report(shapes, sizes, counts, cells, runs, bad);
        if (bad > 0) {
            System.exit(1);
        }
    }

    // One run of one cell; fills {GB/s, worst p99 us}; returns the payloads found wrong.
    private static long cell(String shape, long size, int n, double seconds, Path dir, double[] out)
        throws IOException, InterruptedException {
        List<String> consumers = new ArrayList<>();
        List<String> producers = new ArrayList<>();
        for (int i = 0; i < (shape.equals("fanout") ? n : 1); i++) {
            consumers.add("c" + i);
        }
        for (int i = 0; i < (shape.equals("fanin") ? n : 1); i++) {
            producers.add("p" + i);
        }
        List<Worker> consumerJvms = new ArrayList<>();
        List<Worker> producerJvms = new ArrayList<>();
        try {
            for (String c : consumers) {
                consumerJvms.add(start("consumer", c, dir, size, seconds, "-", 0));
            }
            for (Worker c : consumerJvms) {
                c.awaitLine("READY");
            }
            for (int i = 0; i < producers.size(); i++) {
                producerJvms.add(start("producer", producers.get(i), dir, size, seconds, String.join(",", consumers), i));
            }
            for (Worker p : producerJvms) {
                p.awaitLine("READY");
            }
            Files.createFile(dir.resolve("go"));
            double bytesPerSecond = 0;
            double worstP99 = 0;
            for (Worker p : producerJvms) {
                Map<String, String> result = result(p.awaitLine("RESULT"));
                bytesPerSecond += Long.parseLong(result.get("payloads")) * size / Double.parseDouble(result.get("seconds"));
                worstP99 = Math.max(worstP99, Double.parseDouble(result.get("p99us")));
                p.process().waitFor(60, TimeUnit.SECONDS);
            }
            long badPayloads = 0;
            for (Worker c : consumerJvms) {
                c.process().getOutputStream().close();
                badPayloads += Long.parseLong(result(c.awaitLine("RESULT")).get("bad"));
                c.process().waitFor(60, TimeUnit.SECONDS);
            }
            out[0] = bytesPerSecond / 1e9;
            out[1] = worstP99;
            return badPayloads;
        } finally {
            producerJvms.forEach(w -> w.process().destroyForcibly());
            consumerJvms.forEach(w -> w.process().destroyForcibly());
        }
    }

    private static void report(List<String> shapes, long[] sizes, int[] counts, Map<String, List<double[]>> cells,
                               int runs, long bad) {
        System.out.printf(Locale.ROOT, "%nmedian (min..max) of %d runs; wrong payloads: %d%n", runs, bad);
        for (String shape : shapes) {
            for (long size : sizes) {
                System.out.printf(Locale.ROOT, "%n%s, %s: %s%n", shape, XBench.human(size),
                    shape.equals("fanin") ? "N producers -> 1 consumer" : "1 producer -> M consumers in turn");
                double pair = XBench.stats(cells.get(shape + " " + size + " " + counts[0]), 0)[0];
                double pairP99 = XBench.stats(cells.get(shape + " " + size + " " + counts[0]), 1)[0];
                for (int n : counts) {
                    List<double[]> rows = cells.get(shape + " " + size + " " + n);
                    double[] gb = XBench.stats(rows, 0);
                    double[] p99 = XBench.stats(rows, 1);
                    System.out.printf(Locale.ROOT, "  x%-3d %.3f (%.3f..%.3f) GB/s = %.2fx of x%d; worst p99 %.0f us"
                        + " (%.0f..%.0f) = %.1fx%n", n, gb[0], gb[1], gb[2], gb[0] / pair, counts[0], p99[0], p99[1],
                        p99[2], p99[0] / pairP99);
                }
            }
        }
    }

    private static Worker start(String role, String entity, Path dir, long size, double seconds, String consumers,
                                 long id) throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED",
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
            ScaleBench.class.getName(), "child", role, entity, dir.toString(), Long.toString(size),
            Double.toString(seconds), consumers, Long.toString(id)));
        Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        return new Worker(p, new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)));
    }

    /** A worker process and its output, read line by line. */
    private record Worker(Process process, BufferedReader out) {
        // Reads up to the first line starting with `prefix`, and returns it.
        String awaitLine(String prefix) throws IOException {
            String line;
            while ((line = out.readLine()) != null) {
                if (line.startsWith(prefix)) {
                    return line;
                }
            }
            throw new IOException("a worker ended before it printed " + prefix + " (exit "
                + process.onExit().join().exitValue() + ")");
        }
    }

    private static void child(String[] args) throws Exception {
        String role = args[1];
        String entity = args[2];
        String dir = args[3];
        long size = Long.parseLong(args[4]);
        if (role.equals("consumer")) {
            ScalePeer.consumer(entity, dir, size);
        } else {
            ScalePeer.producer(entity, dir, size, Double.parseDouble(args[5]), List.of(args[6].split(",")),
                Long.parseLong(args[7]));
        }
        System.exit(0);
    }

    private static Map<String, String> result(String line) {
        Map<String, String> values = new LinkedHashMap<>();
        for (String part : line.substring(7).split(" ")) {
            int eq = part.indexOf('=');
            values.put(part.substring(0, eq), part.substring(eq + 1));
        }
        return values;
    }
}
