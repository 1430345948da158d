package io.mstar.transport.xbench;

import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
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
import java.util.stream.Collectors;

/**
 * The cross-process benchmark. For each run and each peer, a fresh consumer JVM and a fresh producer JVM
 * go through every size (warm-up, then the measured time) under {@link Protocol}; then the single-process
 * references (memcpy, the fill, CRC32C) run here. Prints per size and peer the median and min..max over the
 * runs of GB/s, payloads/s and the send-to-ACK p50, p99 and p99.9, the ratios against Aeron IPC and the fill,
 * then each run's ratio against Aeron IPC (the runs go peer after peer, so a ratio is taken between cells
 * measured minutes apart at most), and writes {@code target/xbench/results.csv} and {@code target/xbench/gbps.svg}.
 * A load made in the same run ({@link Load}, {@code -Dxbench.load=}): {@code spin1} a process spinning on one
 * thread (a busy neighbour; {@code -Dxbench.busy=true} says the same), {@code spinAll} one spinning thread per
 * core, {@code build} a Maven build of this project in a copy of its tree, over and over.
 *
 * <pre>
 *   mvn -q test-compile exec:exec@xbench [-Dxbench.args="RUNS SECONDS [PEER,PEER...]"] [-Dxbench.sizes=4096,65536]
 * </pre>
 */
public final class XBench {
    static final List<String> PEERS = List.of("arena-send", "arena-claim", "user-post", "user-claim", "aeron-ipc", "tcp",
        "uds", "file");
    /**
     * Peers run only when named: the cross-node path between two directories over TCP, as the project's harness
     * ({@code remote}) and a user's code drive it ({@code user-remote} claims and posts, {@code user-post-remote}
     * posts its own buffer), and TCP under TLS 1.3 ({@code tls},
     * the peer for those two with TLS on: {@code -Dxbench.jvmArgs=-Dxbench.tlsDir=DIR}).
     */
    static final List<String> NODE_PEERS = List.of("remote", "user-remote", "user-post-remote", "tls");
    /** Run only when named: arena-claim with the producer reading its own ACKs (outcomes polled on its thread). */
    static final List<String> VARIANTS = List.of("arena-polled", "user-post-polled", "user-claim-polled");
    static final List<String> REFERENCES = List.of("memcpy", "fill", "crc32c");
    /** Aeron's own sample, run beside the aeron-ipc peer ({@link AeronSample}). */
    static final String SAMPLE = "aeron-sample";

    private XBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("child")) {
            child(args);
            return;
        }
        if (args.length > 0 && args[0].equals("busy")) {
            busy();
            return;
        }
        int runs = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 1.5;
        List<String> peers = args.length > 2 ? List.of(args[2].split(",")) : PEERS;
        PrintStream out = System.out;
        // column -> size -> one {payloads/s, GB/s, p50 us, p99 us, p99.9 us} per run
        Map<String, Map<Long, List<double[]>>> results = new LinkedHashMap<>();
        long corrupted = 0;
        Map<String, List<double[]>> costs = new LinkedHashMap<>(); // "peer side size" -> {cpu us, switches, bytes} per run
        WarmUp warmUp = new WarmUp();
        OwnedFile workDir = OwnedFile.createDirectory(Path.of("/dev/shm"), "mstar-demo-" + Owner.newNonce());
        String loadName = System.getProperty("xbench.load", "none");
        Load load = Load.start(loadName.equals("none") && Boolean.getBoolean("xbench.busy") ? "spin1" : loadName,
            () -> start(List.of("busy")));
        try {
            for (int run = 1; run <= runs; run++) {
                for (String peer : peers) {
                    Path dir = Files.createDirectories(Path.of(workDir.path(), peer + "-" + run));
                    corrupted += pair(peer, dir, seconds, results.computeIfAbsent(peer, p -> new LinkedHashMap<>()),
                        costs, warmUp);
                    out.println("run " + run + " " + peer + " done");
                }
                if (peers.contains("aeron-ipc")) {
                    sample(dir(workDir, run), seconds, results, out);
                }
                for (String reference : REFERENCES) {
                    for (long size : Protocol.SIZES) {
                        double bytesPerSecond = Protocol.reference(reference, size, Math.min(1.0, seconds));
                        results.computeIfAbsent(reference, r -> new LinkedHashMap<>())
                            .computeIfAbsent(size, s -> new ArrayList<>())
                            .add(new double[] {bytesPerSecond / size, bytesPerSecond / 1e9, Double.NaN, Double.NaN,
                                Double.NaN});
                    }
                }
            }
        } finally {
            load.close();
            deleteTree(Path.of(workDir.path()));
            workDir.close();
        }
        Path target = Files.createDirectories(Path.of("target/xbench"));
        if (!load.name().equals("none")) {
            out.printf(Locale.ROOT, "%nwith a load throughout: %s%n", load.describe());
        }
        report(out, results, runs, corrupted);
        reportRuns(out, results);
        reportCosts(out, costs);
        warmUp.report(out);
        Files.writeString(target.resolve("results.csv"), csv(results));
        Files.writeString(target.resolve("gbps.svg"), Plot.svg(results));
        out.println("wrote target/xbench/results.csv and target/xbench/gbps.svg");
        if (corrupted > 0) {
            System.exit(1);
        }
    }

    // Runs one consumer and one producer JVM through every size; returns the corrupted payloads.
    private static long pair(String peer, Path dir, double seconds, Map<Long, List<double[]>> rows,
                             Map<String, List<double[]>> costs, WarmUp warmUp) throws IOException, InterruptedException {
        Process consumer = start("consumer", peer, dir, seconds);
        Process producer = null;
        try {
            BufferedReader consumerOut = reader(consumer);
            String line = consumerOut.readLine();
            while (line != null && line.startsWith("[")) { // the JVM's own log lines, e.g. a flight recording's
                line = consumerOut.readLine();
            }
            if (!"READY".equals(line)) {
                throw new IllegalStateException(peer + " consumer did not start: " + line);
            }
            producer = start("producer", peer, dir, seconds);
            BufferedReader producerOut = reader(producer);
            while ((line = producerOut.readLine()) != null) {
                if (line.startsWith("ROW ")) {
                    String[] f = line.split(" ");
                    rows.computeIfAbsent(Long.parseLong(f[1]), s -> new ArrayList<>()).add(new double[] {
                        Double.parseDouble(f[2]), Double.parseDouble(f[3]), Double.parseDouble(f[4]),
                        Double.parseDouble(f[5]), Double.parseDouble(f[6])});
                }
                cost(peer, line, costs);
                warmUp.take(peer, line);
            }
            if (!producer.waitFor(60, TimeUnit.SECONDS) || producer.exitValue() != 0) {
                throw new IllegalStateException(peer + " producer failed: exit " + producer.exitValue());
            }
            String verdict = null;
            while ((line = consumerOut.readLine()) != null) {
                if (line.startsWith("VERIFIED ")) {
                    verdict = line;
                }
                cost(peer, line, costs);
                warmUp.take(peer, line);
            }
            if (!consumer.waitFor(60, TimeUnit.SECONDS) || verdict == null) {
                throw new IllegalStateException(peer + " consumer did not finish");
            }
            return Long.parseLong(verdict.split(" ")[3]);
        } finally {
            consumer.destroyForcibly();
            if (producer != null) {
                producer.destroyForcibly();
            }
        }
    }

    // A "COST side size cpu-us switches bytes" line (per payload, see Cost): one row per run.
    private static void cost(String peer, String line, Map<String, List<double[]>> costs) {
        if (line.startsWith("COST ")) {
            String[] f = line.split(" ");
            costs.computeIfAbsent(peer + " " + f[1] + " " + human(Long.parseLong(f[2])), k -> new ArrayList<>())
                .add(new double[] {Double.parseDouble(f[3]), Double.parseDouble(f[4]), Double.parseDouble(f[5])});
        }
    }

    private static void reportCosts(PrintStream out, Map<String, List<double[]>> costs) {
        if (costs.isEmpty()) {
            return;
        }
        out.printf(Locale.ROOT, "%nper payload, every thread of the JVM, median (min..max) of the runs%n");
        out.printf(Locale.ROOT, "  %-36s %-24s %-24s %s%n", "peer side size", "CPU us", "context switches",
            "bytes allocated");
        costs.forEach((cell, rows) -> {
            String[] v = new String[3];
            for (int c = 0; c < 3; c++) {
                double[] m = stats(rows, c);
                v[c] = String.format(Locale.ROOT, "%.3f (%.3f..%.3f)", m[0], m[1], m[2]);
            }
            out.printf(Locale.ROOT, "  %-36s %-24s %-24s %s%n", cell, v[0], v[1], v[2]);
        });
    }

    private static Process start(String role, String peer, Path dir, double seconds) throws IOException {
        return start(List.of("child", role, peer, dir.toString(), Double.toString(seconds)));
    }

    private static Process start(List<String> args) throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED",
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dxbench.sizes=" + Arrays.stream(Protocol.SIZES).mapToObj(Long::toString).collect(Collectors.joining(",")),
            "-cp", System.getProperty("java.class.path")));
        // Extra flags for both JVMs of a pair, e.g. -Dxbench.jvmArgs=-Xlog:gc:file=/tmp/gc-%p.log
        String extra = System.getProperty("xbench.jvmArgs", "").trim();
        if (!extra.isEmpty()) {
            command.addAll(List.of(extra.split("[\\s,]+"))); // commas too: Maven passes it as one word
        }
        command.add(XBench.class.getName());
        command.addAll(args);
        return new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static BufferedReader reader(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    }

    private static void child(String[] args) throws Exception {
        String role = args[1];
        String peer = args[2];
        String dir = args[3];
        double seconds = Double.parseDouble(args[4]);
        boolean producer = role.equals("producer");
        switch (peer) {
            case "arena-send", "arena-claim", "arena-polled", "file", "remote" -> {
                if (producer) {
                    ArenaPeer.producer(peer, dir, seconds);
                } else {
                    ArenaPeer.consumer(peer, dir);
                }
            }
            case "user-post", "user-claim", "user-post-polled", "user-claim-polled", "user-remote", "user-post-remote" -> {
                if (producer) {
                    UserPeer.producer(peer, dir, seconds);
                } else {
                    UserPeer.consumer(peer, dir);
                }
            }
            case "tls" -> {
                if (producer) {
                    TlsSocketPeer.producer(dir, seconds);
                } else {
                    TlsSocketPeer.consumer(dir);
                }
            }
            case "aeron-ipc" -> {
                if (producer) {
                    AeronPeer.producer(dir, seconds);
                } else {
                    AeronPeer.consumer(dir);
                }
            }
            case "uds", "tcp" -> {
                if (producer) {
                    SocketPeer.producer(dir, peer.equals("tcp"), seconds);
                } else {
                    SocketPeer.consumer(dir, peer.equals("tcp"));
                }
            }
            default -> throw new IllegalArgumentException("unknown peer: " + peer + ", known: " + PEERS + ", "
                + NODE_PEERS + " and " + VARIANTS);
        }
        System.exit(0); // daemon threads of the peers end with the JVM
    }

    // The busy neighbour: one thread that never idles, until the launcher kills it.
    private static void busy() {
        long x = 1;
        while (x != 0) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        System.out.println(x);
    }

    /** {median, min, max} of one column over the runs. */
    static double[] stats(List<double[]> rows, int column) {
        double[] v = rows.stream().mapToDouble(r -> r[column]).sorted().toArray();
        int n = v.length;
        return new double[] {n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[0], v[n - 1]};
    }

    private static void report(PrintStream out, Map<String, Map<Long, List<double[]>>> results, int runs, long corrupted) {
        out.println();
        out.printf(Locale.ROOT, "median (min..max) of %d runs; corrupted payloads: %d%n", runs, corrupted);
        for (long size : Protocol.SIZES) {
            out.printf(Locale.ROOT, "%n%s, window %d%n", human(size), Protocol.window(size));
            out.printf(Locale.ROOT, "  %-12s %-24s %-26s %-10s %-10s %-10s %s%n", "peer", "GB/s", "payloads/s", "p50 us",
                "p99 us", "p99.9 us", "vs aeron-ipc, vs fill, vs tcp");
            double aeron = results.containsKey("aeron-ipc") ? stats(results.get("aeron-ipc").get(size), 1)[0] : Double.NaN;
            double fill = stats(results.get("fill").get(size), 1)[0];
            double tcp = results.containsKey("tcp") ? stats(results.get("tcp").get(size), 1)[0] : Double.NaN;
            results.forEach((column, bySize) -> {
                List<double[]> rows = bySize.get(size);
                if (rows == null) {
                    return;
                }
                double[] gb = stats(rows, 1);
                double[] rate = stats(rows, 0);
                out.printf(Locale.ROOT, "  %-12s %-24s %-26s %-10s %-10s %-10s %.2f, %.2f, %.2f%n", column,
                    String.format(Locale.ROOT, "%.2f (%.2f..%.2f)", gb[0], gb[1], gb[2]),
                    String.format(Locale.ROOT, "%.0f (%.0f..%.0f)", rate[0], rate[1], rate[2]),
                    Double.isNaN(stats(rows, 2)[0]) ? "-" : String.format(Locale.ROOT, "%.1f", stats(rows, 2)[0]),
                    Double.isNaN(stats(rows, 3)[0]) ? "-" : String.format(Locale.ROOT, "%.1f", stats(rows, 3)[0]),
                    Double.isNaN(stats(rows, 4)[0]) ? "-" : String.format(Locale.ROOT, "%.1f", stats(rows, 4)[0]),
                    gb[0] / aeron, gb[0] / fill, gb[0] / tcp);
            });
        }
    }

    // Aeron's own sample in this run, beside the aeron-ipc peer (sizes its IPC term takes in one message).
    private static void sample(Path dir, double seconds, Map<String, Map<Long, List<double[]>>> results, PrintStream out)
        throws IOException, InterruptedException {
        if (!AeronSample.available()) {
            out.println("aeron-sample skipped: " + AeronSample.LIB + " is missing (give -Dxbench.args=... on the command"
                + " line: the pom's aeron-sample profile copies Aeron's samples there)");
            return;
        }
        for (long size : Protocol.SIZES) {
            if (size <= AeronSample.MAX_SIZE) {
                double gbps = AeronSample.gbps(size, Protocol.warmUpSeconds(seconds), seconds, dir);
                results.computeIfAbsent(SAMPLE, r -> new LinkedHashMap<>()).computeIfAbsent(size, s -> new ArrayList<>())
                    .add(new double[] {gbps * 1e9 / size, gbps, Double.NaN, Double.NaN, Double.NaN});
            }
        }
    }

    private static Path dir(OwnedFile workDir, int run) throws IOException {
        return Files.createDirectories(Path.of(workDir.path(), "aeron-sample-" + run));
    }

    // Each run's ratio to Aeron IPC in the same run, per size and peer; and the aeron-ipc peer against Aeron's sample.
    private static void reportRuns(PrintStream out, Map<String, Map<Long, List<double[]>>> results) {
        Map<Long, List<double[]>> aeron = results.get("aeron-ipc");
        if (aeron == null) {
            return;
        }
        Map<Long, List<double[]>> sample = results.get(SAMPLE);
        if (sample != null) {
            out.printf(Locale.ROOT, "%nper run, the aeron-ipc peer (two JVMs, an ACK and a CRC32C per payload) relative"
                + " to Aeron's own sample in the same run (EmbeddedIpcThroughput: one JVM, no ACK, no check)%n");
            sample.forEach((size, rows) -> {
                StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "  %-7s aeron-ipc   ", human(size)));
                for (int run = 0; run < rows.size() && run < aeron.get(size).size(); run++) {
                    line.append(String.format(Locale.ROOT, " %.2f", aeron.get(size).get(run)[1] / rows.get(run)[1]));
                }
                out.println(line);
            });
        }
        out.printf(Locale.ROOT, "%nper run, GB/s relative to aeron-ipc in the same run%n");
        for (long size : Protocol.SIZES) {
            results.forEach((column, bySize) -> {
                List<double[]> rows = bySize.get(size);
                if (column.equals("aeron-ipc") || column.equals(SAMPLE) || REFERENCES.contains(column) || rows == null) {
                    return;
                }
                StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "  %-7s %-12s", human(size), column));
                for (int run = 0; run < rows.size() && run < aeron.get(size).size(); run++) {
                    line.append(String.format(Locale.ROOT, " %.2f", rows.get(run)[1] / aeron.get(size).get(run)[1]));
                }
                out.println(line);
            });
        }
    }

    private static String csv(Map<String, Map<Long, List<double[]>>> results) {
        StringBuilder csv = new StringBuilder("column,size,run,payloads_per_s,gb_per_s,p50_us,p99_us,p999_us\n");
        results.forEach((column, bySize) -> bySize.forEach((size, rows) -> {
            for (int i = 0; i < rows.size(); i++) {
                double[] r = rows.get(i);
                csv.append(String.format(Locale.ROOT, "%s,%d,%d,%.1f,%.4f,%.2f,%.2f,%.2f%n", column, size, i + 1, r[0],
                    r[1], r[2], r[3], r[4]));
            }
        }));
        return csv.toString();
    }

    static String human(long size) {
        return size >= 1 << 20 ? (size >> 20) + " MiB" : (size >> 10) + " KiB";
    }

    static void deleteTree(Path root) throws IOException {
        if (!Files.exists(root)) {
            return;
        }
        try (var walk = Files.walk(root)) {
            for (Path p : walk.sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
