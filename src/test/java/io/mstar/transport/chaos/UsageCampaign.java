package io.mstar.transport.chaos;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.Stream;

/**
 * A seeded, randomized campaign of API usage across real processes ({@link UsageWorker}), beside the fault
 * campaign: run after run, each drawn from the seed, 1 or 2 producers with the ways of calling the endpoint
 * that {@link UsageWorker} draws send to 1 or 2 consumers, while spinning processes keep every core busy (one
 * more than there are cores: more runnable threads than cores) and any worker is stopped (SIGSTOP) for up to
 * half a second at random instants, then continued. A lost wake-up, an outcome told twice or under another
 * tensor's name, or one that waits on a thread that is not scheduled shows up as a {@code VIOLATION} line of a
 * worker; after each run the directory must be empty.
 */
final class UsageCampaign {
    /** One run's length: long enough for bursts, waits for every outcome and stops, short enough for many runs. */
    static final long RUN_MILLIS = 6_000;

    private final long seed;
    private final long millis;
    private final Path dir;
    private final List<String> jvmOptions;

    /** What a campaign found. */
    record Report(long seed, int runs, long posted, long told, List<String> configs, List<String> violations) {
        @Override
        public String toString() {
            StringBuilder s = new StringBuilder("usage campaign: seed=" + seed + " runs=" + runs + " tensorsPosted="
                + posted + " outcomesTold=" + told + " violations=" + violations.size());
            violations.stream().limit(30).forEach(v -> s.append("\n  VIOLATION seed=").append(seed).append(": ").append(v));
            return s.toString();
        }
    }

    UsageCampaign(long seed, long millis, Path dir, List<String> jvmOptions) {
        this.seed = seed;
        this.millis = millis;
        this.dir = dir;
        this.jvmOptions = jvmOptions;
    }

    Report run() throws Exception {
        long end = System.currentTimeMillis() + millis;
        List<String> violations = new ArrayList<>();
        List<String> configs = new ArrayList<>();
        long[] counts = new long[2];
        int runs = 0;
        List<Process> burners = burn(Runtime.getRuntime().availableProcessors() + 1);
        try {
            do {
                runs++;
                runOnce(new SplittableRandom(seed * 1_000_003L + runs), runs, counts, configs, violations);
            } while (System.currentTimeMillis() < end);
        } finally {
            burners.forEach(Process::destroyForcibly);
        }
        return new Report(seed, runs, counts[0], counts[1], configs, violations);
    }

    private void runOnce(SplittableRandom r, int run, long[] counts, List<String> configs, List<String> violations)
        throws Exception {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, dir.toString(),
            TransportConfig.ARENA, r.nextInt(8) == 0 ? "0" : "1", TransportConfig.SEGMENT_MB, "4",
            TransportConfig.MAX_SEGMENTS, "4", TransportConfig.RECLAIM_INTERVAL_S, "1");
        List<String> consumers = r.nextBoolean() ? List.of("c0") : List.of("c0", "c1");
        List<String> producers = r.nextBoolean() ? List.of("p0") : List.of("p0", "p1");
        boolean stage = r.nextInt(3) == 0 // c0 forwards what it gets to s0 from its handler, under a window
            || jvmOptions.stream().anyMatch(o -> o.startsWith("-Dusage.forced=") && o.contains("stage"));
        List<String> smallStacks = r.nextBoolean() || jvmOptions.contains("-Dusage.forced=listenerPosts")
            ? List.of("-Xss256k") : List.of(); // as servers of many threads have
        List<ChildJvm> consumerJvms = new ArrayList<>();
        List<ChildJvm> producerJvms = new ArrayList<>();
        List<ChildJvm> all = new ArrayList<>();
        try {
            if (stage) {
                ChildJvm sink = ChildJvm.start(true, jvmOptions, env, UsageWorker.class, "consumer", "s0",
                    Long.toString(r.nextLong()));
                sink.awaitOutput("READY", 60);
                consumerJvms.add(sink);
                all.add(sink);
            }
            for (String c : consumers) {
                List<String> args = new ArrayList<>(List.of("consumer", c, Long.toString(r.nextLong())));
                if (stage && c.equals("c0")) {
                    args.add("s0");
                }
                ChildJvm child = ChildJvm.start(true, withStacks(jvmOptions, smallStacks), env, UsageWorker.class,
                    args.toArray(String[]::new));
                consumerJvms.add(child);
                all.add(child);
            }
            for (ChildJvm c : consumerJvms) {
                c.awaitOutput("READY", 60);
            }
            for (String p : producers) {
                ChildJvm child = ChildJvm.start(true, withStacks(jvmOptions, smallStacks), env, UsageWorker.class,
                    "producer", p,
                    Long.toString(r.nextLong()), Long.toString(RUN_MILLIS), String.join(",", consumers));
                producerJvms.add(child);
                all.add(child);
            }
            for (ChildJvm p : producerJvms) {
                p.awaitOutput("READY", 60);
            }
            long stopUntil = System.currentTimeMillis() + RUN_MILLIS;
            while (System.currentTimeMillis() < stopUntil) { // a worker not scheduled for a while, at random
                Thread.sleep(300 + r.nextInt(1200));
                ChildJvm victim = all.get(r.nextInt(all.size()));
                victim.signal("STOP");
                Thread.sleep(50 + r.nextInt(450));
                victim.signal("CONT");
            }
            for (ChildJvm p : producerJvms) {
                try {
                    int exit = p.await(UsageWorker.OUTCOME_BOUND_MS / 1000 * 4 + 60);
                    if (exit != 0) {
                        violations.add("run " + run + ": a producer exited " + exit + ": " + p.state());
                    }
                } catch (AssertionError stuck) {
                    violations.add("run " + run + ": a producer did not finish: " + stuck.getMessage());
                }
            }
            for (ChildJvm c : consumerJvms.reversed()) { // a stage before its sink
                c.signal("TERM");
                c.await(60);
            }
            for (ChildJvm child : all) {
                collect(child.output(), run, counts, configs, violations);
            }
            String left = leftovers();
            if (!left.isEmpty()) {
                violations.add("run " + run + ": files left after every worker stopped: " + left);
            }
        } finally {
            for (ChildJvm child : all) {
                child.signal("CONT");
                child.process().destroyForcibly().waitFor();
                child.deleteLog();
            }
        }
    }

    private static List<String> withStacks(List<String> jvmOptions, List<String> stacks) {
        List<String> all = new ArrayList<>(jvmOptions);
        all.addAll(stacks);
        return all;
    }

    private static void collect(String output, int run, long[] counts, List<String> configs, List<String> violations) {
        for (String line : output.split("\n")) {
            if (line.startsWith("VIOLATION ")) {
                violations.add("run " + run + ": " + line.substring(10));
            } else if (line.startsWith("CONFIG ")) {
                configs.add("run " + run + ": " + line.substring(7));
            } else if (line.startsWith("SUMMARY ")) {
                for (String part : line.split(" ")) {
                    if (part.startsWith("posted=")) {
                        counts[0] += Long.parseLong(part.substring(7));
                    } else if (part.startsWith("told=")) {
                        counts[1] += Long.parseLong(part.substring(5));
                    } else if (part.startsWith("pending=") && !part.equals("pending=0")) {
                        violations.add("run " + run + ": outcomes never told: " + line);
                    }
                }
            }
        }
    }

    // The files a run left: none once every worker stopped (the consumers by SIGTERM, which cleans up).
    private String leftovers() throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            return String.join(" ", files.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("mstar_")).toList());
        }
    }

    // Processes that spin until destroyed or this JVM dies (kill -0 is a shell builtin: no fork per turn).
    private static List<Process> burn(int processes) throws IOException {
        List<Process> burners = new ArrayList<>();
        for (int i = 0; i < processes; i++) {
            burners.add(new ProcessBuilder("sh", "-c", "while kill -0 $PPID 2>/dev/null; do :; done").start());
        }
        return burners;
    }
}
