package io.mstar.transport.testing;

import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A Python process of the package in {@code python/}, from the virtual environment the build makes
 * ({@code target/python-venv}, by {@code python/venv.sh}); its output goes to a log, as a {@link ChildJvm}'s.
 */
public final class PythonChild {
    public static final Path VENV_PYTHON = Path.of("target/python-venv/bin/python");

    private final Process process;
    private final Path log;

    private PythonChild(Process process, Path log) {
        this.process = process;
        this.log = log;
    }

    /** Skips the calling test, saying why, where the build made no virtual environment (python/venv.sh said why). */
    public static void assumeVenv() {
        Assumptions.assumeTrue(Files.isExecutable(VENV_PYTHON), "no " + VENV_PYTHON + ": the build's python/venv.sh"
            + " needs Debian's python3-numpy python3-pytest python3-hypothesis python3-cffi python3-venv python3-dev");
    }

    /** {@code python -m module args...} with {@code env} added to this JVM's environment. */
    public static PythonChild start(Map<String, String> env, String module, String... args) throws IOException {
        Path log = Files.createTempFile("mstar-python-", ".log");
        List<String> command = new ArrayList<>(List.of(VENV_PYTHON.toString(), "-u", "-m", module));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().putAll(env);
        return new PythonChild(builder.start(), log);
    }

    public Process process() {
        return process;
    }

    public String output() throws IOException {
        return Files.readString(log);
    }

    /** Waits for the exit and returns the code; kills the process and fails when it takes longer. */
    public int await(long timeoutSeconds) throws InterruptedException, IOException {
        if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
            throw new AssertionError("python did not finish in " + timeoutSeconds + " s:\n" + output());
        }
        return process.exitValue();
    }

    /** Waits until the process printed {@code text}; fails when it exits or the timeout passes first. */
    public void awaitOutput(String text, long timeoutSeconds) throws InterruptedException, IOException {
        long deadline = System.nanoTime() + timeoutSeconds * 1_000_000_000L;
        while (!output().contains(text)) {
            if (!process.isAlive() || System.nanoTime() > deadline) {
                throw new AssertionError("python never printed " + text + ":\n" + output());
            }
            Thread.sleep(20);
        }
    }

    public void deleteLog() throws IOException {
        Files.deleteIfExists(log);
    }
}
