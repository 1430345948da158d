package io.mstar.transport.chaos;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;

/**
 * A seeded, randomized fault campaign across real processes and two "nodes": producers p0 and p1 and consumers
 * c0 to c2 share node A's directory, consumer r0 is on node B (its own directory, reached over TCP on 127.0.0.1).
 * While the producers send ({@link ChaosWorker}), faults come at random instants from the seed: SIGKILL or
 * SIGTERM of a consumer and its restart under the same entity, SIGKILL of a producer and its restart, SIGSTOP
 * and SIGCONT of any process, and r0 stopped past the cross-node timeout (a remote reader that stops reading its
 * socket while its tensors time out and their slots go to others). Afterwards every
 * process stops and the logs are checked:
 * <ul>
 *   <li>every byte a handler saw was its producer's for that request (no {@code BAD}), no incarnation handled a
 *       tensor twice ({@code DUP});</li>
 *   <li>every outcome came within {@link ChaosWorker#OUTCOME_BOUND_MS} while its producer lived (no {@code LATE},
 *       a producer's last incarnation drained), none was a refusal of a reused slot ({@code STALE}), no send threw;</li>
 *   <li>DELIVERED means every named consumer on node A handled it (r0's DELIVERED means its node holds the bytes);</li>
 *   <li>no tensor reached node B with bytes that changed under the sender's write (a checksum refusal there);</li>
 *   <li>after every process stops and a sweep, both directories are empty.</li>
 * </ul>
 */
final class FaultCampaign {
    private static final List<String> LOCAL_CONSUMERS = List.of("c0", "c1", "c2");
    private static final String REMOTE_CONSUMER = "r0";
    private static final List<String> PRODUCERS = List.of("p0", "p1");

    /** What a campaign found. */
    record Report(long seed, long millis, Map<String, Integer> faults, long sent, long outcomes, long handled,
                  List<String> violations) {
        @Override
        public String toString() {
            StringBuilder s = new StringBuilder("fault campaign: seed=" + seed + " seconds=" + millis / 1000
                + " faults=" + faults + " tensorsSent=" + sent + " outcomes=" + outcomes + " tensorsChecked=" + handled
                + " violations=" + violations.size());
            violations.stream().limit(30).forEach(v -> s.append("\n  VIOLATION seed=").append(seed).append(": ").append(v));
            return s.toString();
        }
    }

    private record Action(long atMs, String kind, String entity) {
    }

    private final long seed;
    private final long millis;
    private final Path dirA;
    private final Path dirB;
    private final List<String> jvmOptions;
    private final SplittableRandom random;
    private final Map<String, String> endpoints = new HashMap<>();
    private final Map<String, ChildJvm> running = new HashMap<>();
    private final Map<String, List<ChildJvm>> incarnations = new LinkedHashMap<>();
    private final Set<String> busy = new HashSet<>(); // stopped or down: no second fault until it is back
    private final PriorityQueue<Action> actions = new PriorityQueue<>((a, b) -> Long.compare(a.atMs(), b.atMs()));
    private final Map<String, Integer> faults = new TreeMap<>();
    private long endMs;

    /** @param jvmOptions for every process (a test seam that turns a guard off, for a negative control) */
    FaultCampaign(long seed, long millis, Path dirA, Path dirB, List<String> jvmOptions) throws IOException {
        this.seed = seed;
        this.millis = millis;
        this.dirA = dirA;
        this.dirB = dirB;
        this.jvmOptions = jvmOptions;
        this.random = new SplittableRandom(seed);
        List<String> cross = new ArrayList<>(PRODUCERS);
        cross.add(REMOTE_CONSUMER);
        for (String entity : cross) {
            endpoints.put(entity, "127.0.0.1:" + TwoNodes.freePorts()[0]);
        }
    }

    Report run() throws Exception {
        try {
            for (String c : LOCAL_CONSUMERS) {
                start(c);
            }
            start(REMOTE_CONSUMER);
            awaitReady();
            endMs = System.currentTimeMillis() + millis;
            for (String p : PRODUCERS) {
                start(p);
            }
            while (System.currentTimeMillis() < endMs) {
                runDue(false);
                Thread.sleep(20 + random.nextInt(60));
                if (random.nextInt(12) == 0) {
                    fault();
                }
            }
            runDue(true);
            for (String p : PRODUCERS) {
                ChildJvm producer = running.get(p);
                producer.await(ChaosWorker.OUTCOME_BOUND_MS / 1000 + 60);
            }
            for (String c : consumers()) {
                running.get(c).process().destroy(); // SIGTERM: each removes its own files
            }
            for (String c : consumers()) {
                running.get(c).await(60);
            }
            List<String> violations = check();
            return new Report(seed, millis, faults, count(incarnations, "SENT "), count(incarnations, "OUT "),
                count(incarnations, "GOT "), violations);
        } finally {
            for (ChildJvm child : running.values()) {
                child.process().destroyForcibly().waitFor();
            }
        }
    }

    private static List<String> consumers() {
        List<String> all = new ArrayList<>(LOCAL_CONSUMERS);
        all.add(REMOTE_CONSUMER);
        return all;
    }

    // One fault at a random entity: kill or stop and restart a consumer, kill and restart a producer, stop any
    // process for a moment, or stall r0 past the cross-node timeout (a remote reader that stops reading).
    private void fault() throws Exception {
        int dice = random.nextInt(20); // 0-4 kill, 5-6 term, 7-8 producer kill, 9-12 stop, 13-19 stall r0
        List<String> pool = dice < 7 ? consumers() : dice < 9 ? PRODUCERS : dice < 13 ? all() : List.of(REMOTE_CONSUMER);
        String entity = pool.get(random.nextInt(pool.size()));
        if (busy.contains(entity)) {
            return;
        }
        ChildJvm child = running.get(entity);
        long now = System.currentTimeMillis();
        busy.add(entity);
        if (dice < 5 || dice == 7 || dice == 8) {
            signal(child, dice < 5 ? "kill" : "producerKill", "KILL");
            child.process().waitFor();
            actions.add(new Action(now + random.nextInt(1500), "restart", entity));
        } else if (dice < 7) {
            signal(child, "term", "TERM");
            actions.add(new Action(now + random.nextInt(1500), "restart", entity));
        } else if (dice < 13) {
            signal(child, "stop", "STOP");
            actions.add(new Action(now + 100 + random.nextInt(2400), "cont", entity));
        } else {
            signal(child, "stall", "STOP");
            actions.add(new Action(now + 2000 + random.nextInt(3000), "cont", entity));
        }
    }

    private static List<String> all() {
        List<String> all = new ArrayList<>(consumers());
        all.addAll(PRODUCERS);
        return all;
    }

    private void signal(ChildJvm child, String fault, String signal) throws Exception {
        faults.merge(fault, 1, Integer::sum);
        child.signal(signal);
    }

    // Runs the restarts and continues that are due (all of them once the campaign ends).
    private void runDue(boolean all) throws Exception {
        while (!actions.isEmpty() && (all || actions.peek().atMs() <= System.currentTimeMillis())) {
            Action a = actions.poll();
            ChildJvm child = running.get(a.entity());
            if (a.kind().equals("cont")) {
                child.signal("CONT");
            } else {
                child.await(30); // a SIGTERM'd consumer finishes its cleanup first
                start(a.entity());
            }
            busy.remove(a.entity());
        }
    }

    private void start(String entity) throws IOException {
        boolean nodeB = entity.equals(REMOTE_CONSUMER);
        Map<String, String> env = new HashMap<>(Map.of(
            TransportConfig.SHM_DIR, (nodeB ? dirB : dirA).toString(),
            TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4",
            TransportConfig.MAX_SEGMENTS, "16"));
        if (endpoints.containsKey(entity)) {
            StringBuilder map = new StringBuilder();
            endpoints.forEach((e, at) -> map.append(map.isEmpty() ? "" : ",").append(e).append('=').append(at));
            env.put(RemoteConfig.ENTITIES, map.toString());
            env.put(RemoteConfig.LISTEN, endpoints.get(entity));
            env.put(RemoteConfig.SECRET, TwoNodes.SECRET);
            // Producers give up on a stopped r0 after 1 s; r0 waits longer for a sender's stopped bytes, so that once
            // it resumes it reads what was queued for it instead of closing at once.
            env.put(RemoteConfig.TIMEOUT_S, nodeB ? "10" : "1");
        }
        long childSeed = random.nextLong();
        List<String> args = new ArrayList<>(List.of(PRODUCERS.contains(entity) ? "producer" : "consumer", entity,
            Long.toString(childSeed)));
        if (PRODUCERS.contains(entity)) {
            args.add(Long.toString(Math.max(500, endMs - System.currentTimeMillis())));
            args.add(String.join(",", consumers()));
        }
        List<String> options = new ArrayList<>(jvmOptions);
        options.add("-Xmx256m");
        ChildJvm child = ChildJvm.start(true, options, env, ChaosWorker.class, args.toArray(String[]::new));
        running.put(entity, child);
        incarnations.computeIfAbsent(entity, e -> new ArrayList<>()).add(child);
    }

    private void awaitReady() throws Exception {
        for (String c : consumers()) {
            running.get(c).awaitOutput("READY " + c, 60);
        }
    }

    private List<String> check() throws IOException {
        return check(incarnations, Set.copyOf(PRODUCERS), Set.of(REMOTE_CONSUMER), List.of(dirA, dirB));
    }

    /**
     * The invariants over the logs of every incarnation of every entity: see the class comment. A DELIVERED
     * tensor is checked against the consumers named for it except {@code elsewhere} (on another node, where
     * DELIVERED means the node holds the bytes); the last incarnation of each of {@code producers} must have
     * drained; {@code dirs} are swept and must then be empty.
     */
    static List<String> check(Map<String, List<ChildJvm>> incarnations, Set<String> producers, Set<String> elsewhere,
                              List<Path> dirs) throws IOException {
        List<String> violations = new ArrayList<>();
        Map<String, List<String>> targets = new HashMap<>();
        Set<String> delivered = new HashSet<>();
        Map<String, Set<String>> handled = new HashMap<>();
        for (Map.Entry<String, List<ChildJvm>> e : incarnations.entrySet()) {
            List<ChildJvm> children = e.getValue();
            for (int i = 0; i < children.size(); i++) {
                String who = e.getKey() + "#" + i;
                String output = children.get(i).output();
                if (children.get(i).crashReport() != null) {
                    violations.add(who + " crashed: " + children.get(i).crashReport());
                }
                boolean drained = false;
                for (String line : output.split("\n")) {
                    String[] f = line.split(" ");
                    switch (f[0]) {
                        case "BAD", "DUP", "LATE", "ERR", "UNTRACKED" -> violations.add(who + ": " + line);
                        case "SENT" -> targets.put(f[1], List.of(f[2].split(",")));
                        case "GOT" -> handled.computeIfAbsent(e.getKey(), k -> new HashSet<>()).add(f[1]);
                        case "OUT" -> {
                            if (line.endsWith("STALE")) {
                                violations.add(who + ": a reused slot was refused: " + line);
                            } else if (f[2].equals("DELIVERED")) {
                                delivered.add(f[1]);
                            }
                        }
                        case "SUMMARY" -> {
                            drained = line.endsWith("pending=0");
                            if (!drained) {
                                violations.add(who + ": outcomes missing at the end: " + line);
                            }
                        }
                        default -> {
                            if (line.contains("do not match their checksum")) {
                                violations.add(who + ": bytes changed under a network write: " + line);
                            }
                        }
                    }
                }
                if (producers.contains(e.getKey()) && i == children.size() - 1 && !output.contains("SUMMARY")) {
                    violations.add(who + ": the last producer incarnation did not finish: " + tail(output));
                }
            }
        }
        for (String id : delivered) {
            for (String consumer : targets.getOrDefault(id, List.of())) {
                if (!elsewhere.contains(consumer) && !handled.getOrDefault(consumer, Set.of()).contains(id)) {
                    violations.add(id + " was DELIVERED but consumer " + consumer + " never handled it");
                }
            }
        }
        for (Path dir : dirs) {
            Reclaimer.sweep(dir);
            List<String> left = ShmTestDir.list(dir);
            if (!left.isEmpty()) {
                violations.add("files left in " + dir + " after every process stopped and a sweep: " + left);
            }
        }
        return violations;
    }

    /** How many lines of all incarnations' logs start with {@code prefix}. */
    static long count(Map<String, List<ChildJvm>> incarnations, String prefix) throws IOException {
        long n = 0;
        for (List<ChildJvm> children : incarnations.values()) {
            for (ChildJvm child : children) {
                n += child.output().lines().filter(l -> l.startsWith(prefix)).count();
            }
        }
        return n;
    }

    private static String tail(String output) {
        List<String> lines = output.lines().toList();
        return String.join(" | ", lines.subList(Math.max(0, lines.size() - 5), lines.size()));
    }
}
