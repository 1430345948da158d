package io.mstar.transport;

import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The built jar as users consume it: a JVM with only the jar and its runtime dependencies (SLF4J's API,
 * Agrona, JNA) and the flags the README documents, once on the module path and once on the class path,
 * runs {@code mstar-shm selftest}: a send, a receive and an ACK through the arena and the mailbox, and the
 * CUDA probe (against the CPU stand-in, through the real JNA binding).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ArtifactLaunchIT {
    private static final List<String> RUNTIME_DEPENDENCIES = List.of("slf4j-api-", "agrona-", "jna-");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @TempDir
    Path readme;

    private static String launchPath() {
        List<String> entries = new ArrayList<>(List.of(System.getProperty("mstar.jar")));
        for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
            String name = Path.of(entry).getFileName().toString();
            if (name.endsWith(".jar") && RUNTIME_DEPENDENCIES.stream().anyMatch(name::startsWith)) {
                entries.add(entry);
            }
        }
        assertEquals(1 + RUNTIME_DEPENDENCIES.size(), entries.size(), "the jar and its runtime dependencies: " + entries);
        return String.join(File.pathSeparator, entries);
    }

    private String selftest(String... launch) throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        List<String> command = new ArrayList<>(List.of(java));
        command.addAll(Arrays.asList(launch));
        command.addAll(List.of("selftest", "--dir", shm.path().toString()));
        Path log = Files.createTempFile("mstar-launch-", ".log");
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().put("MSTAR_CUDART", System.getProperty("mstar.cudart"));
        Process process = builder.start();
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "selftest did not finish");
        String out = Files.readString(log);
        Files.delete(log);
        assertEquals(0, process.exitValue(), String.join(" ", command) + "\n" + out);
        assertTrue(out.contains("selftest passed") && out.contains("cuda: usable"), out);
        return out;
    }

    private static final List<String> MODULE_PATH_FLAGS = List.of("--enable-native-access=io.mstar.transport,com.sun.jna",
        "--add-exports", "java.base/jdk.internal.misc=org.agrona");
    private static final List<String> CLASS_PATH_FLAGS = List.of("--enable-native-access=ALL-UNNAMED",
        "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED");

    @Test
    void onTheModulePath() throws Exception {
        List<String> launch = new ArrayList<>(List.of("--module-path", launchPath()));
        launch.addAll(MODULE_PATH_FLAGS);
        launch.addAll(List.of("-m", "io.mstar.transport/io.mstar.transport.cli.MstarShm"));
        String out = selftest(launch.toArray(String[]::new));
        assertTrue(out.contains("module=module io.mstar.transport"), out);
    }

    @Test
    void onTheClassPath() throws Exception {
        List<String> launch = new ArrayList<>(List.of("-cp", launchPath()));
        launch.addAll(CLASS_PATH_FLAGS);
        launch.add("io.mstar.transport.cli.MstarShm");
        String out = selftest(launch.toArray(String[]::new));
        assertTrue(out.contains("module=unnamed module"), out);
    }

    /** The cross-node path configured, Netty absent (it is optional): the error names what to add. */
    @Test
    void theCrossNodePathWithoutNettySaysWhatToAdd() throws Exception {
        String java = ProcessHandle.current().info().command().orElseThrow();
        List<String> command = new ArrayList<>(List.of(java, "-cp", launchPath()));
        command.addAll(CLASS_PATH_FLAGS);
        command.addAll(List.of("io.mstar.transport.cli.MstarShm", "selftest", "--dir", shm.path().toString()));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put(RemoteConfig.LISTEN, "127.0.0.1:40123");
        builder.environment().put(RemoteConfig.ENTITIES, "elsewhere=127.0.0.1:40124");
        Process process = builder.start();
        String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "selftest did not finish");
        assertTrue(process.exitValue() != 0, out);
        assertTrue(out.contains("io.netty:netty-handler"), out);
    }

    /** The README's producer and consumer, compiled by the build, as two processes over the built jar. */
    @Test
    void theReadmeProducerAndConsumerOnTheModulePath() throws Exception {
        List<String> launch = new ArrayList<>(List.of("--module-path", launchPath(), "--add-modules", "io.mstar.transport",
            "-cp", readmeClasses().toString()));
        launch.addAll(MODULE_PATH_FLAGS);
        readmePair(launch);
    }

    @Test
    void theReadmeProducerAndConsumerOnTheClassPath() throws Exception {
        List<String> launch = new ArrayList<>(List.of("-cp", launchPath() + File.pathSeparator + readmeClasses()));
        launch.addAll(CLASS_PATH_FLAGS);
        readmePair(launch);
    }

    private void readmePair(List<String> launch) throws Exception {
        Process consumer = start(launch, "quickstart.Consumer");
        Process producer = start(launch, "quickstart.Producer");
        assertTrue(producer.waitFor(60, TimeUnit.SECONDS) && consumer.waitFor(60, TimeUnit.SECONDS), "the README pair hung");
        String producerOut = new String(producer.getInputStream().readAllBytes());
        String consumerOut = new String(consumer.getInputStream().readAllBytes());
        assertEquals(0, producer.exitValue(), producerOut);
        assertEquals(0, consumer.exitValue(), consumerOut);
        assertTrue(producerOut.contains("producer: Delivery[requestId=request-1, DELIVERED]"), producerOut);
        assertTrue(consumerOut.contains("consumer: request-1 from producer, F32 602112 bytes"), consumerOut);
    }

    private Process start(List<String> launch, String main) throws Exception {
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow()));
        command.addAll(launch);
        command.add(main);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("MSTAR_SHM_DIR", shm.path().toString());
        builder.environment().put("MSTAR_SHM_ARENA", "1");
        return builder.start();
    }

    // Only the README's two programs (the quickstart's), copied out of the test classes.
    private Path readmeClasses() throws Exception {
        Path dir = readme;
        Path from = Path.of("target/test-classes/quickstart");
        Path to = Files.createDirectories(dir.resolve("quickstart"));
        try (var classes = Files.list(from)) {
            for (Path c : classes.filter(p -> !p.getFileName().toString().startsWith("Fast")).toList()) {
                Files.copy(c, to.resolve(c.getFileName()));
            }
        }
        return dir;
    }

    /** The self-contained command runs with `java -jar` alone: no class path, no flags. */
    @Test
    void theSelfContainedCommandRunsWithJavaJarAlone() throws Exception {
        String jar = System.getProperty("mstar.cli.jar");
        assertEquals("mstar-shm " + System.getProperty("mstar.version"), run("-jar", jar, "--version").strip());
        String selftest = run("-jar", jar, "selftest", "--dir", shm.path().toString(), "--json");
        assertTrue(selftest.contains("\"passed\":true"), selftest);
        String doctor = run("-jar", jar, "doctor", "--dir", shm.path().toString(), "--json");
        assertTrue(doctor.startsWith("{") && doctor.contains("\"healthy\":true"), doctor);
    }

    // Standard output only: the command's logs go to standard error.
    private static String run(String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElseThrow()));
        command.addAll(Arrays.asList(args));
        Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String out = new String(process.getInputStream().readAllBytes());
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), String.join(" ", command));
        assertEquals(0, process.exitValue(), String.join(" ", command) + "\n" + out);
        return out;
    }
}
