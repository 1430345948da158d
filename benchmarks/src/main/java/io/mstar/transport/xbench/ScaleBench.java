package io.mstar.transport.xbench;

import io.aeron.driver.MediaDriver;
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
 * The scale benchmark: many worker processes on one node, each a fresh JVM. Shapes: {@code fanin}, N producers
 * into one consumer; {@code fanout}, one producer to M consumers in turn. Peers, cell by cell in the same run:
 * {@code mstar} ({@link ScalePeer}, the exported API) and {@code aeron} ({@link ScaleAeronPeer}, Aeron IPC through
 * one media driver in this JVM), each producer with a window of {@link Protocol#window} in flight; a peer named
 * {@code /split} ({@code mstar/split}) divides that window among the N producers, so that the node has as much in
 * flight as one pair has: with a whole window each, N producers queue N times as much at one consumer and, by
 * Little's law, each waits N times as long at the same aggregate rate.
 *
 * <p>For each shape, size, count and peer, the workers start together, warm up until every worker's JIT is quiet,
 * then measure RUNS windows of SECONDS one after another, every producer at once; reported per cell: the aggregate
 * GB/s (median and min..max over the windows), the worst producer's p99 send-to-outcome, both against the peer's
 * own first count, and the aggregate against Aeron's in the same cell. Every payload is checked; a wrong one fails
 * the run.
 *
 * <pre>
 *   mvn -q test-compile exec:exec@scale [-Dscale.args="RUNS SECONDS SHAPES SIZES COUNTS PEERS"]
 *   e.g. -Dscale.args="3 2 fanin,fanout 4096,65536,1048576 1,4,16 mstar,aeron,mstar/split"
 *   -Dscale.workerJvmArgs="-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit" adds flags to every worker
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
        int[] counts = Arrays.stream((args.length > 4 ? args[4] : "1,4,16").split(",")).mapToInt(Integer::parseInt)
            .toArray();
        List<String> peers = List.of((args.length > 5 ? args[5] : "mstar,aeron").split(","));
        Map<String, List<double[]>> cells = new LinkedHashMap<>(); // "peer shape size count" -> {GB/s, worst p99 us}
        long bad = 0;
        OwnedFile workDir = OwnedFile.createDirectory(Path.of("/dev/shm"), "mstar-demo-" + Owner.newNonce());
        String aeronDir = Path.of(workDir.path(), "aeron").toString();
        int cell = 0;
        try (MediaDriver driver = peers.stream().anyMatch(p -> p.startsWith("aeron"))
            ? MediaDriver.launchEmbedded(AeronPeer.driverContext(aeronDir)) : null) {
            for (String shape : shapes) {
                for (long size : sizes) {
                    for (int n : counts) {
                        for (String peer : peers) {
                            Path dir = Files.createDirectories(Path.of(workDir.path(), shape + "-" + size + "-" + n));
                            List<double[]> windows = new ArrayList<>();
                            double[] warmUp = new double[2]; // seconds, the workers' JIT ticks by then
                            bad += cell(peer, shape, size, n, seconds, runs, dir, aeronDir, cell++, windows, warmUp);
                            cells.put(peer + " " + shape + " " + size + " " + n, windows);
                            for (int run = 0; run < runs; run++) {
                                System.out.printf(Locale.ROOT, "%s %s %s x%d run %d: %.3f GB/s, worst p99 %.0f us"
                                    + " (warm-up %.1f s, JIT %.0f ticks)%n", peer, shape, XBench.human(size), n,
                                    run + 1, windows.get(run)[0], windows.get(run)[1], warmUp[0], warmUp[1]);
                            }
                            XBench.deleteTree(dir);
                        }
                    }
                }
            }
        } finally {
            XBench.deleteTree(Path.of(workDir.path()));
            workDir.close();
        }
        report(peers, shapes, sizes, counts, cells, runs, bad);
        if (bad > 0) {
            System.exit(1);
        }
    }

    // One cell: its workers start, warm up, and measure `runs` windows; adds {GB/s, worst p99 us} per window to
    // `windows` and sets the warm-up's seconds; returns the payloads found wrong.
    private static long cell(String peer, String shape, long size, int n, double seconds, int runs, Path dir,
                             String aeronDir, int cellNumber, List<double[]> windows, double[] warmUp)
        throws IOException, InterruptedException {
        String transport = peer.split("/")[0];
        int consumers = shape.equals("fanout") ? n : 1;
        int producers = shape.equals("fanin") ? n : 1;
        int window = peer.endsWith("/split") ? Math.max(1, Protocol.window(size) / producers) : Protocol.window(size);
        List<String> common = List.of(dir.toString(), Long.toString(size), Double.toString(seconds),
            Integer.toString(runs), Integer.toString(window), Integer.toString(consumers), aeronDir,
            Integer.toString(cellNumber));
        List<Worker> consumerJvms = new ArrayList<>();
        List<Worker> producerJvms = new ArrayList<>();
        try {
            for (int i = 0; i < consumers; i++) {
                consumerJvms.add(start(transport, "consumer", i, common));
            }
            for (Worker c : consumerJvms) {
                c.awaitLine("READY");
            }
            for (int i = 0; i < producers; i++) {
                producerJvms.add(start(transport, "producer", i, common));
            }
            for (Worker p : producerJvms) {
                p.awaitLine("READY");
            }
            Files.createFile(dir.resolve("go"));
            List<Worker> all = new ArrayList<>(producerJvms);
            all.addAll(consumerJvms);
            warmUp[0] = awaitWarm(all);
            warmUp[1] = compilerTicks(all);
            Files.createFile(dir.resolve("measure"));
            for (int run = 0; run < runs; run++) {
                double bytesPerSecond = 0;
                double worstP99 = 0;
                for (Worker p : producerJvms) {
                    Map<String, String> result = result(p.awaitLine("RESULT"));
                    bytesPerSecond += Long.parseLong(result.get("payloads")) * size / Double.parseDouble(result.get("seconds"));
                    worstP99 = Math.max(worstP99, Double.parseDouble(result.get("p99us")));
                }
                windows.add(new double[] {bytesPerSecond / 1e9, worstP99});
            }
            for (Worker p : producerJvms) {
                p.process().waitFor(60, TimeUnit.SECONDS);
            }
            long badPayloads = 0;
            for (Worker c : consumerJvms) {
                c.process().getOutputStream().close();
                badPayloads += Long.parseLong(result(c.awaitLine("RESULT")).get("bad"));
                c.process().waitFor(60, TimeUnit.SECONDS);
            }
            return badPayloads;
        } finally {
            producerJvms.forEach(w -> w.process().destroyForcibly());
            consumerJvms.forEach(w -> w.process().destroyForcibly());
        }
    }

    /**
     * The warm-up, in seconds: at least one, then until the JIT compilers of every worker together used at most
     * {@value #QUIET_COMPILER_TICKS} clock ticks in the last half second (at most {@value #MAX_WARM_UP_S} s). Sixteen
     * fresh JVMs on two cores compile for several seconds; measured before, a cell measures their compilers.
     */
    private static double awaitWarm(List<Worker> workers) throws InterruptedException {
        long start = System.nanoTime();
        Thread.sleep(1000);
        long before = compilerTicks(workers);
        while (System.nanoTime() - start < MAX_WARM_UP_S * 1_000_000_000L) {
            Thread.sleep(500);
            long now = compilerTicks(workers);
            if (now - before <= QUIET_COMPILER_TICKS) {
                break;
            }
            before = now;
        }
        return (System.nanoTime() - start) / 1e9;
    }

    private static final int QUIET_COMPILER_TICKS = 5;
    private static final int MAX_WARM_UP_S = 90;

    // CPU clock ticks of the workers' JIT compiler threads so far.
    private static long compilerTicks(List<Worker> workers) {
        long ticks = 0;
        for (Worker w : workers) {
            ticks += Cost.compilerTicks(w.process().pid());
        }
        return ticks;
    }

    private static void report(List<String> peers, List<String> shapes, long[] sizes, int[] counts,
                               Map<String, List<double[]>> cells, int runs, long bad) {
        System.out.printf(Locale.ROOT, "%nmedian (min..max) of %d windows of the same warm workers; wrong payloads: %d%n",
            runs, bad);
        for (String shape : shapes) {
            for (long size : sizes) {
                System.out.printf(Locale.ROOT, "%n%s, %s: %s%n", shape, XBench.human(size),
                    shape.equals("fanin") ? "N producers -> 1 consumer" : "1 producer -> M consumers in turn");
                for (int n : counts) {
                    List<double[]> aeron = cells.get("aeron " + shape + " " + size + " " + n);
                    for (String peer : peers) {
                        List<double[]> first = cells.get(peer + " " + shape + " " + size + " " + counts[0]);
                        double[] gb = XBench.stats(cells.get(peer + " " + shape + " " + size + " " + n), 0);
                        double[] p99 = XBench.stats(cells.get(peer + " " + shape + " " + size + " " + n), 1);
                        System.out.printf(Locale.ROOT, "  x%-3d %-12s %.3f (%.3f..%.3f) GB/s = %.2fx of x%d, %.2fx aeron;"
                            + " worst p99 %.0f us (%.0f..%.0f) = %.1fx of x%d%n", n, peer, gb[0], gb[1], gb[2],
                            gb[0] / XBench.stats(first, 0)[0], counts[0],
                            aeron == null ? Double.NaN : gb[0] / XBench.stats(aeron, 0)[0], p99[0], p99[1], p99[2],
                            p99[0] / XBench.stats(first, 1)[0], counts[0]);
                    }
                }
            }
        }
    }

    // A worker JVM: `child TRANSPORT ROLE INDEX DIR SIZE SECONDS RUNS WINDOW CONSUMERS AERON_DIR CELL`.
    private static Worker start(String transport, String role, int index, List<String> common) throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED",
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED", "-XX:+UseSerialGC", "-Xmx256m",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path")));
        String extra = System.getProperty("scale.workerJvmArgs", "").trim(); // e.g. a profiler's flags
        if (!extra.isEmpty()) {
            command.addAll(List.of(extra.split(" +")));
        }
        command.addAll(List.of(ScaleBench.class.getName(), "child", transport, role, Integer.toString(index)));
        command.addAll(common);
        return Worker.of(new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start());
    }

    /** A worker process and its output, read line by line. */
    record Worker(Process process, BufferedReader out) {
        static Worker of(Process p) {
            return new Worker(p, new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)));
        }

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
        boolean aeron = args[1].equals("aeron");
        boolean consumer = args[2].equals("consumer");
        int index = Integer.parseInt(args[3]);
        String dir = args[4];
        long size = Long.parseLong(args[5]);
        ScaleWindows windows = new ScaleWindows(dir, Double.parseDouble(args[6]), Integer.parseInt(args[7]));
        int window = Integer.parseInt(args[8]);
        int consumers = Integer.parseInt(args[9]);
        String aeronDir = args[10];
        int cell = Integer.parseInt(args[11]);
        if (aeron && consumer) {
            ScaleAeronPeer.consumer(cell, index, aeronDir, size);
        } else if (aeron) {
            ScaleAeronPeer.producer(cell, index, aeronDir, size, consumers, window, windows);
        } else if (consumer) {
            ScalePeer.consumer("c" + index, dir, size);
        } else {
            List<String> names = new ArrayList<>();
            for (int c = 0; c < consumers; c++) {
                names.add("c" + c);
            }
            ScalePeer.producer("p" + index, dir, size, names, index, window, windows);
        }
        System.exit(0);
    }

    /** The {@code key=value} pairs of a {@code RESULT ...} line. */
    static Map<String, String> result(String line) {
        Map<String, String> values = new LinkedHashMap<>();
        for (String part : line.substring(7).split(" ")) {
            int eq = part.indexOf('=');
            values.put(part.substring(0, eq), part.substring(eq + 1));
        }
        return values;
    }
}
