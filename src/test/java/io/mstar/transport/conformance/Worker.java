package io.mstar.transport.conformance;

import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.PythonChild;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * One conformance worker process, JVM ({@link ConformanceWorker}) or Python ({@code mstar_transport.conformance}),
 * started with the same arguments either way and read through the same lines.
 */
final class Worker {
    private final String name;
    private final ChildJvm jvm;
    private final PythonChild python;

    private Worker(String name, ChildJvm jvm, PythonChild python) {
        this.name = name;
        this.jvm = jvm;
        this.python = python;
    }

    static Worker start(Pairing.Language language, Map<String, String> env, String... args) throws IOException {
        String name = language + " " + String.join(" ", args);
        return language == Pairing.Language.JVM
            ? new Worker(name, ChildJvm.start(true, env, ConformanceWorker.class, args), null)
            : new Worker(name, null, PythonChild.start(env, "mstar_transport.conformance", args));
    }

    Process process() {
        return jvm != null ? jvm.process() : python.process();
    }

    String output() throws IOException {
        return jvm != null ? jvm.output() : python.output();
    }

    /** Waits until the worker printed {@code text}; fails, with its output, when it exits or the time passes first. */
    void awaitOutput(String text, long timeoutSeconds) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + timeoutSeconds * 1_000_000_000L;
        while (!output().contains(text)) {
            if (!process().isAlive() || System.nanoTime() > deadline) {
                throw new AssertionError(this + " never printed " + text + (process().isAlive() ? "" : " (exited "
                    + process().exitValue() + ")") + ":\n" + output());
            }
            Thread.sleep(10);
        }
    }

    /** Waits for the exit and returns its code; kills the worker and fails, with its output, when it takes longer. */
    int await(long timeoutSeconds) throws IOException, InterruptedException {
        if (!process().waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            String state = jvm != null ? jvm.state() : python.output();
            process().destroyForcibly().waitFor();
            throw new AssertionError(this + " did not finish in " + timeoutSeconds + " s (a hang); " + state);
        }
        return process().exitValue();
    }

    /** SIGKILL, and waits until it is gone. */
    void kill() throws InterruptedException {
        process().destroyForcibly().waitFor();
    }

    /** SIGTERM (each language closes its endpoint on it), and waits up to 30 s for the exit. */
    int terminate() throws IOException, InterruptedException {
        process().destroy();
        return await(30);
    }

    /** The fields of the RESULT line ({@code key=value}, {@code failures={A=1, B=2}} kept whole); fails without one. */
    Map<String, String> result() throws IOException {
        String line = output().lines().filter(l -> l.startsWith("RESULT ")).reduce((a, b) -> b)
            .orElseThrow(() -> new AssertionError(this + " printed no RESULT line:\n" + outputQuietly()));
        Map<String, String> fields = new HashMap<>();
        int braces = line.indexOf(" failures={");
        if (braces >= 0) {
            fields.put("failures", line.substring(braces + " failures=".length()));
            line = line.substring(0, braces);
        }
        for (String part : line.substring("RESULT ".length()).split(" ")) {
            int eq = part.indexOf('=');
            fields.put(part.substring(0, eq), part.substring(eq + 1));
        }
        return fields;
    }

    long number(String key) throws IOException {
        String value = result().get(key);
        if (value == null) {
            throw new AssertionError(this + " RESULT has no " + key + ":\n" + output());
        }
        return Long.parseLong(value);
    }

    String outputQuietly() {
        try {
            return output();
        } catch (IOException e) {
            return "(no output: " + e + ")";
        }
    }

    void deleteLog() throws IOException {
        if (jvm != null) {
            jvm.deleteLog();
        } else {
            python.deleteLog();
        }
    }

    @Override
    public String toString() {
        return name;
    }
}
