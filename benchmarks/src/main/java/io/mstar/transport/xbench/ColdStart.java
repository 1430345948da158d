package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;

import java.io.File;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;

/**
 * Cold starts of two nodes at once: a consumer JVM and a producer JVM started together, each a fresh process on
 * its own shared-memory directory, TCP on 127.0.0.1. Each prints how long its JVM took to reach {@code main}, how
 * long {@code TensorEndpoint.open} took and, for the producer, how long its first {@code send} call blocked and
 * how long until that tensor was DELIVERED; the launcher reports the median and min..max over the rounds, each
 * round run plain and with a JDK AOT cache ({@code -XX:AOTCache}, made by one training round first), in turn.
 *
 * <pre>
 *   mvn -q test-compile exec:exec@coldstart [-Dcoldstart.rounds=5]
 * </pre>
 */
public final class ColdStart {
    private static final String SECRET = "cold-start-secret-0123456789abcdef";

    private ColdStart() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && (args[0].equals("producer") || args[0].equals("consumer"))) {
            node(args[0]);
            return;
        }
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        Path work = Files.createTempDirectory("mstar-coldstart-");
        try {
            // An AOT cache (JDK 25: classes loaded and linked, and method profiles, from a training run) needs a class
            // path of jars: the build's class directories are jarred first.
            String jars = jarredClassPath(work);
            String cache = work.resolve("mstar.aot").toString();
            Map<String, List<String>> modes = new LinkedHashMap<>();
            modes.put("plain", List.of());
            modes.put("aot", List.of("-XX:AOTCache=" + cache));
            round("training", List.of("-XX:AOTCacheOutput=" + cache), jars, new LinkedHashMap<>());
            Map<String, List<Double>> results = new LinkedHashMap<>();
            for (int r = 1; r <= rounds; r++) {
                for (var mode : modes.entrySet()) {
                    round(mode.getKey() + " " + r, mode.getValue(), jars, results);
                }
            }
            System.out.printf(Locale.ROOT, "%nmedian (min..max) of %d rounds, ms%n", rounds);
            for (String mode : modes.keySet()) {
                results.forEach((k, v) -> {
                    if (k.startsWith(mode + " ")) {
                        double[] sorted = v.stream().mapToDouble(Double::doubleValue).sorted().toArray();
                        System.out.printf(Locale.ROOT, "  %-24s %7.0f (%.0f..%.0f)%n", k, sorted[sorted.length / 2],
                            sorted[0], sorted[sorted.length - 1]);
                    }
                });
            }
        } finally {
            XBench.deleteTree(work);
        }
    }

    // One round: a consumer and a producer started together; adds "mode role measure" -> ms to `results`.
    private static void round(String name, List<String> jvmArgs, String classPath, Map<String, List<Double>> results)
        throws Exception {
        OwnedFile dirA = OwnedFile.createDirectory(Path.of("/dev/shm"), "mstar-demo-" + Owner.newNonce());
        OwnedFile dirB = OwnedFile.createDirectory(Path.of("/dev/shm"), "mstar-demo-" + Owner.newNonce());
        int[] ports = new int[2];
        try (ServerSocket a = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             ServerSocket b = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            ports[0] = a.getLocalPort();
            ports[1] = b.getLocalPort();
        }
        String entities = "prefill=127.0.0.1:" + ports[0] + ",decode=127.0.0.1:" + ports[1];
        try {
            Process consumer = start("consumer", dirB.path(), "127.0.0.1:" + ports[1], entities, jvmArgs, classPath);
            Process producer = start("producer", dirA.path(), "127.0.0.1:" + ports[0], entities, jvmArgs, classPath);
            Map<String, String> p = result(producer);
            consumer.getOutputStream().close(); // the producer is done: the consumer may stop
            Map<String, String> c = result(consumer);
            consumer.waitFor(60, TimeUnit.SECONDS);
            producer.waitFor(60, TimeUnit.SECONDS);
            System.out.printf(Locale.ROOT, "%s: consumer main %s ms, open %s ms; producer main %s ms, open %s ms, first"
                + " send %s ms, delivered %s ms%n", name, c.get("main"), c.get("open"), p.get("main"), p.get("open"),
                p.get("send"), p.get("delivered"));
            String mode = name.split(" ")[0];
            for (String k : List.of("main", "open")) {
                results.computeIfAbsent(mode + " consumer " + k, x -> new ArrayList<>()).add(Double.parseDouble(c.get(k)));
            }
            for (String k : List.of("main", "open", "send", "delivered")) {
                results.computeIfAbsent(mode + " producer " + k, x -> new ArrayList<>()).add(Double.parseDouble(p.get(k)));
            }
        } finally {
            XBench.deleteTree(Path.of(dirA.path()));
            XBench.deleteTree(Path.of(dirB.path()));
            dirA.close();
            dirB.close();
        }
    }

    // This JVM's class path with each directory replaced by a jar of it, made in `work`.
    private static String jarredClassPath(Path work) throws IOException {
        List<String> entries = new ArrayList<>();
        int n = 0;
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            Path dir = Path.of(entry);
            if (!Files.isDirectory(dir)) {
                entries.add(entry);
                continue;
            }
            Path jar = work.resolve("classes-" + n++ + ".jar");
            try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar));
                 var files = Files.walk(dir)) {
                for (Path f : files.filter(Files::isRegularFile).toList()) {
                    out.putNextEntry(new JarEntry(dir.relativize(f).toString().replace(File.separatorChar, '/')));
                    Files.copy(f, out);
                    out.closeEntry();
                }
            }
            entries.add(jar.toString());
        }
        return String.join(File.pathSeparator, entries);
    }

    private static Process start(String role, String dir, String listen, String entities, List<String> jvmArgs,
                                 String classPath) throws IOException {
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
            "--enable-native-access=ALL-UNNAMED", "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        command.addAll(jvmArgs);
        command.addAll(List.of("-cp", classPath, ColdStart.class.getName(), role));
        ProcessBuilder pb = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().putAll(Map.of(TransportConfig.SHM_DIR, dir, TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "64", RemoteConfig.LISTEN, listen, RemoteConfig.ENTITIES, entities,
            RemoteConfig.SECRET, SECRET));
        return pb.start();
    }

    private static Map<String, String> result(Process p) throws IOException {
        return ScaleBench.result(ScaleBench.Worker.of(p).awaitLine("RESULT "));
    }

    private static void node(String role) throws Exception {
        long mainAt = System.currentTimeMillis();
        long mainMs = mainAt - ManagementFactory.getRuntimeMXBean().getStartTime();
        long start = System.nanoTime();
        boolean producer = role.equals("producer");
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.fromEnvironment("cold", producer ? "prefill"
            : "decode"))) {
            double openMs = (System.nanoTime() - start) / 1e6;
            if (!producer) {
                System.out.printf(Locale.ROOT, "RESULT main=%d open=%.1f%n", mainMs, openMs);
                Thread stop = ScalePeer.untilInputEnds();
                while (stop.isAlive()) {
                    endpoint.receive(t -> { }, Duration.ofMillis(100));
                }
                return;
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment data = arena.allocate(4096);
                long sendAt = System.nanoTime();
                Delivery d = endpoint.send("decode", "first", Tensor.of(DType.U8, data, 4096));
                double sendMs = (System.nanoTime() - sendAt) / 1e6;
                Delivery.Status status = d.await(Duration.ofSeconds(30));
                double deliveredMs = (System.nanoTime() - sendAt) / 1e6;
                System.out.printf(Locale.ROOT, "RESULT main=%d open=%.1f send=%.1f delivered=%.1f status=%s%n", mainMs,
                    openMs, sendMs, deliveredMs, status);
            }
        }
    }
}
