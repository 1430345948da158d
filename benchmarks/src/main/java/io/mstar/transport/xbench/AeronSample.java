package io.mstar.transport.xbench;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Aeron at its best, from Aeron itself: its sample {@code io.aeron.samples.EmbeddedIpcThroughput} (a publisher
 * and a subscriber thread in one JVM with an embedded driver, busy-spinning, no ACKs, no payload check) run as
 * it ships, in a JVM of its own on the class path that {@code target/aeron-sample-lib} holds (the pom's
 * {@code aeron-sample} profile), at one message length. Its reports (one a second) after the warm-up give the
 * median GB/s: the ceiling the benchmark's {@code aeron-ipc} peer, which adds a second process, an ACK per
 * payload and a CRC32C over every byte, is measured against.
 */
final class AeronSample {
    static final Path LIB = Path.of("target/aeron-sample-lib");
    private static final Pattern REPORT = Pattern.compile("Duration (\\d+)ms - [\\d,]+ messages - ([\\d,]+) payload bytes");
    /** Longest message the sample's IPC term (64 MiB) takes in one piece. */
    static final long MAX_SIZE = 1 << 20;

    private AeronSample() {
    }

    static boolean available() {
        return Files.isDirectory(LIB);
    }

    /** The sample's median GB/s over its reports after {@code warmUpSeconds}, for {@code seconds}. */
    static double gbps(long size, double warmUpSeconds, double seconds, Path dir) throws IOException, InterruptedException {
        String java = ProcessHandle.current().info().command().orElse("java");
        String classPath;
        try (Stream<Path> jars = Files.list(LIB)) {
            classPath = String.join(File.pathSeparator, jars.map(Path::toString).sorted().toList());
        }
        Process sample = new ProcessBuilder(java, "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED", "--enable-native-access=ALL-UNNAMED",
            "-Daeron.dir=" + dir.resolve("aeron-sample"), "-Daeron.dir.delete.on.start=true",
            "-Daeron.dir.delete.on.shutdown=true", "-Daeron.sample.messageLength=" + size,
            "-cp", classPath, "io.aeron.samples.EmbeddedIpcThroughput").redirectErrorStream(true).start();
        List<Double> measured = new ArrayList<>();
        int skip = (int) Math.ceil(warmUpSeconds);
        int wanted = Math.max(1, (int) Math.round(seconds));
        try (BufferedReader out = new BufferedReader(new InputStreamReader(sample.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while (measured.size() < wanted && (line = out.readLine()) != null) {
                Matcher m = REPORT.matcher(line);
                if (m.find() && skip-- <= 0) {
                    measured.add(Long.parseLong(m.group(2).replace(",", "")) / (Long.parseLong(m.group(1)) / 1e3) / 1e9);
                }
            }
        } finally {
            sample.destroy(); // SIGTERM: the sample's SigInt handler closes its driver, which deletes its directory
            if (!sample.waitFor(10, TimeUnit.SECONDS)) {
                sample.destroyForcibly().waitFor();
            }
        }
        return measured.isEmpty() ? Double.NaN : measured.stream().sorted().toList().get(measured.size() / 2);
    }
}
