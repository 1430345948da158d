package io.mstar.transport.xbench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A load on the machine made in the benchmark's own run, so that the peers are measured beside it:
 * {@code none}; {@code spin1}, one process spinning on one thread (a busy neighbour); {@code spinAll}, one
 * spinning process per core (every core busy: more runnable threads than cores); {@code build}, a Maven build
 * of this project ({@code mvn -q -o clean compile} in a copy of {@code src} and the pom) started again each
 * time it ends, as a build beside an inference node would run.
 */
final class Load implements AutoCloseable {
    /** Starts a process that spins on one thread. */
    @FunctionalInterface
    interface Spinner {
        Process start() throws IOException;
    }

    private final String name;
    private final List<Process> spinners = new ArrayList<>();
    private volatile boolean closed;
    private Thread builds;
    private volatile Process build;
    private int buildsDone;
    private Path copy;

    private Load(String name) {
        this.name = name;
    }

    static Load start(String name, Spinner spinner) throws IOException {
        Load load = new Load(name);
        switch (name) {
            case "none" -> { }
            case "spin1" -> load.spinners.add(spinner.start());
            case "spinAll" -> {
                for (int i = 0; i < Runtime.getRuntime().availableProcessors(); i++) {
                    load.spinners.add(spinner.start());
                }
            }
            case "build" -> load.startBuilds();
            default -> throw new IllegalArgumentException("unknown load: " + name + ", known: none, spin1, spinAll, build");
        }
        return load;
    }

    String name() {
        return name;
    }

    String describe() {
        return switch (name) {
            case "spin1" -> "one process spinning on one thread";
            case "spinAll" -> spinners.size() + " processes spinning, one per core";
            case "build" -> "a Maven build of the project, again and again (" + buildsDone + " builds done)";
            default -> "none";
        };
    }

    private void startBuilds() throws IOException {
        copy = Files.createTempDirectory("mstar-xbench-build-");
        new ProcessBuilder("cp", "-r", "pom.xml", "src", "native", copy.toString()).inheritIO().start();
        builds = Thread.ofPlatform().daemon().name("xbench-build").start(() -> {
            while (!closed) {
                try {
                    build = new ProcessBuilder("mvn", "-q", "-o", "clean", "compile", "-Dmaven.javadoc.skip=true")
                        .directory(copy.toFile()).redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
                    build.waitFor();
                    buildsDone++;
                } catch (IOException | InterruptedException e) {
                    return;
                }
            }
        });
    }

    @Override
    public void close() throws IOException, InterruptedException {
        closed = true;
        spinners.forEach(Process::destroyForcibly);
        Process b = build;
        if (b != null) {
            b.descendants().forEach(ProcessHandle::destroyForcibly);
            b.destroyForcibly();
            b.waitFor(10, TimeUnit.SECONDS);
        }
        if (builds != null) {
            builds.join(10_000);
        }
        if (copy != null) {
            new ProcessBuilder("rm", "-rf", copy.toString()).start().waitFor();
        }
    }
}
