package io.mstar.transport.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * A real child JVM running a test main class with this JVM's class path; its output goes to a file, and
 * a fatal error report (a crash: SIGSEGV and the like) to a file of its own, never the working directory.
 */
public final class ChildJvm {
    private final Process process;
    private final Path log;

    private ChildJvm(Process process, Path log) {
        this.process = process;
        this.log = log;
    }

    public static ChildJvm start(Class<?> main, String... args) throws IOException {
        return start(true, Map.of(), main, args);
    }

    /** {@code mailboxFlag}: whether the child gets the export that the mailbox's Agrona buffers need. */
    public static ChildJvm start(boolean mailboxFlag, Class<?> main, String... args) throws IOException {
        return start(mailboxFlag, Map.of(), main, args);
    }

    /** As above, with environment variables set (or replaced) for the child. */
    public static ChildJvm start(boolean mailboxFlag, Map<String, String> env, Class<?> main, String... args)
        throws IOException {
        return start(mailboxFlag, List.of(), env, main, args);
    }

    /**
     * As above, with extra JVM options. The child's standard input is a pipe from this JVM, which the kernel
     * closes when this JVM dies: a child that watches it ({@code ParentWatch}) never outlives the test run.
     */
    public static ChildJvm start(boolean mailboxFlag, List<String> jvmOptions, Map<String, String> env, Class<?> main,
                                 String... args) throws IOException {
        return startUnder(List.of(), mailboxFlag, jvmOptions, env, main, args);
    }

    /** As above, the JVM started by a wrapper command, e.g. {@code unshare --pid --fork}. */
    public static ChildJvm startUnder(List<String> wrapper, boolean mailboxFlag, List<String> jvmOptions,
                                      Map<String, String> env, Class<?> main, String... args) throws IOException {
        String java = ProcessHandle.current().info().command().orElse(System.getProperty("java.home") + "/bin/java");
        Path log = Files.createTempFile("mstar-child-", ".log");
        List<String> command = new ArrayList<>(wrapper);
        command.addAll(List.of(java, "--enable-native-access=ALL-UNNAMED", "-ea", "-Xmx512m",
            "-XX:ErrorFile=" + crashReport(log)));
        // A child lives seconds: C1 alone and the serial collector start it sooner and leave the CPUs to the others
        // (on a 2-core machine, every child's C2 threads competed with the processes under test).
        command.addAll(List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
        command.addAll(jvmOptions);
        if (mailboxFlag) {
            command.add("--add-exports");
            command.add("java.base/jdk.internal.misc=ALL-UNNAMED");
        }
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().putAll(env);
        Process process = builder.start();
        return new ChildJvm(process, log);
    }

    public Process process() {
        return process;
    }

    /** Waits for the exit and returns the code; kills the child and fails when it takes longer than the timeout. */
    public int await(long timeoutSeconds) throws InterruptedException, IOException {
        if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            String state = state();
            process.destroyForcibly().waitFor();
            throw new AssertionError("child JVM did not finish in " + timeoutSeconds + " s; " + state);
        }
        return process.exitValue();
    }

    /**
     * What a running child is doing, short enough to survive a CI log: the last lines it printed, and the
     * stacks of its threads that run this project's code (from jstack beside this JVM's java).
     */
    public String state() throws IOException {
        List<String> lines = output().lines().toList();
        String tail = String.join("\n", lines.subList(Math.max(0, lines.size() - 12), lines.size()));
        StringBuilder threads = new StringBuilder();
        for (String thread : threadDump().split("\n\n")) {
            if (thread.contains("io.mstar.")) {
                threads.append(thread.lines().limit(25).collect(Collectors.joining("\n"))).append("\n\n");
            }
        }
        return "its last output:\n" + tail + "\nits threads in io.mstar code:\n" + threads;
    }

    private String threadDump() {
        try {
            Process jstack = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jstack").toString(),
                Long.toString(process.pid())).redirectErrorStream(true).start();
            String dump = new String(jstack.getInputStream().readAllBytes());
            jstack.waitFor(30, TimeUnit.SECONDS);
            return dump;
        } catch (IOException | InterruptedException e) {
            return "no thread dump: " + e;
        }
    }

    /**
     * Waits until the child has printed {@code text}; fails, with what it is doing, when it exits first or the
     * timeout passes.
     */
    public void awaitOutput(String text, long timeoutSeconds) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeoutSeconds * 1_000_000_000L;
        while (!output().contains(text)) {
            if (System.nanoTime() > deadline || !process.isAlive()) {
                throw new AssertionError("the child did not print '" + text + "'; " + state());
            }
            Thread.sleep(10);
        }
    }

    /** Sends the child a signal by name ({@code STOP}, {@code CONT}, {@code TERM}, {@code KILL}). */
    public void signal(String name) throws IOException, InterruptedException {
        new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).start().waitFor();
    }

    /** Everything the child printed so far. */
    public String output() throws IOException {
        return Files.readString(log);
    }

    /** The value of {@code key=} on the child's RESULT line, or null. */
    public String result(String key) throws IOException {
        for (String line : output().split("\n")) {
            if (line.startsWith("RESULT ")) {
                for (String part : line.substring(7).split(" ")) {
                    if (part.startsWith(key + "=")) {
                        return part.substring(key.length() + 1);
                    }
                }
            }
        }
        return null;
    }

    /** The head of the JVM's fatal error report when the child crashed (the file stays for a look), else null. */
    public String crashReport() throws IOException {
        Path report = crashReport(log);
        if (!Files.exists(report)) {
            return null;
        }
        try (var lines = Files.lines(report)) {
            return report + ":\n" + String.join("\n", lines.limit(12).toList());
        }
    }

    private static Path crashReport(Path log) {
        return log.resolveSibling(log.getFileName() + ".hs_err");
    }

    public void deleteLog() throws IOException {
        Files.deleteIfExists(log);
    }
}
