package io.mstar.transport;

import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.File;
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

    @Test
    void onTheModulePath() throws Exception {
        String out = selftest("--module-path", launchPath(), "--enable-native-access=io.mstar.transport,com.sun.jna",
            "--add-exports", "java.base/jdk.internal.misc=org.agrona",
            "-m", "io.mstar.transport/io.mstar.transport.cli.MstarShm");
        assertTrue(out.contains("module=module io.mstar.transport"), out);
    }

    @Test
    void onTheClassPath() throws Exception {
        String out = selftest("-cp", launchPath(), "--enable-native-access=ALL-UNNAMED",
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED", "io.mstar.transport.cli.MstarShm");
        assertTrue(out.contains("module=unnamed module"), out);
    }
}
