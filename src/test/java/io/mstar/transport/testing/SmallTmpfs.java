package io.mstar.transport.testing;

import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A tmpfs of a given size mounted for one test, to fill it on purpose. Tests using it are skipped,
 * with the reason, where mounting is refused (not root, no CAP_SYS_ADMIN).
 */
public final class SmallTmpfs implements AutoCloseable {
    private final Path mountPoint;

    private SmallTmpfs(Path mountPoint) {
        this.mountPoint = mountPoint;
    }

    public static SmallTmpfs mount(long sizeBytes) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("mstar-tmpfs-");
        String result = run("mount", "-t", "tmpfs", "-o", "size=" + sizeBytes + ",mode=0700", "tmpfs", dir.toString());
        if (result != null) {
            Files.deleteIfExists(dir);
            Assumptions.abort("SKIPPED: cannot mount a small tmpfs to fill on purpose (needs root): " + result);
        }
        return new SmallTmpfs(dir);
    }

    public Path path() {
        return mountPoint;
    }

    @Override
    public void close() throws IOException, InterruptedException {
        String result = run("umount", mountPoint.toString());
        if (result != null) {
            throw new IOException("umount failed: " + result);
        }
        Files.deleteIfExists(mountPoint);
    }

    // Returns null on success, else what the command said.
    private static String run(String... command) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes()).trim();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            return String.join(" ", command) + " timed out";
        }
        return process.exitValue() == 0 ? null : String.join(" ", command) + ": exit " + process.exitValue() + ": " + output;
    }
}
