package io.mstar.transport.crossprocess;

import io.mstar.transport.Delivery;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.VethLink;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A seeded campaign across a real network (two namespaces, a veth pair, entities placed by name): a producer
 * that posts through the endpoint's three sending APIs and reposts every failed tensor until it is delivered
 * ({@link CampaignNode}), while the link goes down for 5 s and for 30 s, is shaped to 1 Gbit/s (tbf), the
 * consumer's process stops for 5 s (SIGSTOP: a stalled node, whose confirmations come late), and the consumer is
 * killed and started again at a new address under the same name, in an order the seed picks
 * ({@code -Dmstar.test.seed} replays one). Every send has exactly one outcome; no tensor told a definite failure
 * was seen by a handler; no tensor was handed over twice (but one handed to the killed consumer, whose window
 * died with it); every tensor ends delivered; the stream resumes within a second of the link's return and
 * within 5 s of the moved consumer's start; no byte read is wrong, no failure's detail says "null", and no file is
 * left on either node. {@code -Dmstar.test.campaignFlags} passes JVM flags to both nodes (a negative control's
 * test seam, say).
 */
@Tag("long")
class CrossNodeCampaignTest {
    private enum Fault { DOWN_5S, DOWN_30S, MOVE, TBF_1GBIT, FREEZE_5S }

    @Test
    void outcomesStayTrueAndRepostsStayOnceThroughPartitionsAMoveAndAShapedLink() throws Exception {
        long seed = Long.getLong("mstar.test.seed", System.nanoTime());
        List<Fault> faults = new ArrayList<>(List.of(Fault.values()));
        Collections.shuffle(faults, new Random(seed));
        System.out.println("campaign seed=" + seed + " (-Dmstar.test.seed=" + seed + " replays it), faults " + faults);
        String flags = System.getProperty("mstar.test.campaignFlags", "");
        Map<String, String> extra = flags.isBlank() ? Map.of() : Map.of("JAVA_TOOL_OPTIONS", flags);
        try (VethLink link = VethLink.createNamed()) {
            Path stopA = link.work.resolve("stopA");
            Path stopB = link.work.resolve("stopB");
            List<Path> received = new ArrayList<>(List.of(link.work.resolve("received0")));
            List<ChildJvm> consumers = new ArrayList<>();
            consumers.add(link.startB(CampaignNode.class, extra, "consumer", received.get(0).toString(),
                stopB.toString()));
            consumers.get(0).awaitOutput("READY", 120);
            ChildJvm producer = link.startA(CampaignNode.class, extra, "producer", Long.toString(seed),
                stopA.toString());
            producer.awaitOutput("OUTCOME ", 120);
            List<Long> upAt = new ArrayList<>();
            long killedAt = -1;
            long movedStartAt = -1;
            long[] shaped = new long[2];
            for (Fault fault : faults) {
                Thread.sleep(3000);
                switch (fault) {
                    case DOWN_5S, DOWN_30S -> {
                        link.down();
                        Thread.sleep(fault == Fault.DOWN_5S ? 5_000 : 30_000);
                        link.up();
                        upAt.add(System.currentTimeMillis());
                    }
                    case MOVE -> {
                        ChildJvm old = consumers.getLast();
                        old.process().destroyForcibly().waitFor();
                        killedAt = System.currentTimeMillis();
                        String address = link.moveB();
                        received.add(link.work.resolve("received1"));
                        ChildJvm moved = link.startB(CampaignNode.class, extra, "consumer",
                            received.getLast().toString(), stopB.toString());
                        consumers.add(moved);
                        moved.awaitOutput("READY", 120);
                        movedStartAt = Long.parseLong(moved.output().lines().filter(l -> l.startsWith("READY "))
                            .findFirst().orElseThrow().substring(6));
                        System.out.println("campaign: decode killed and started again at " + address);
                    }
                    case FREEZE_5S -> {
                        consumers.getLast().signal("STOP");
                        Thread.sleep(5_000);
                        consumers.getLast().signal("CONT");
                    }
                    case TBF_1GBIT -> {
                        link.shape("1gbit");
                        shaped[0] = System.currentTimeMillis();
                        Thread.sleep(8_000);
                        shaped[1] = System.currentTimeMillis();
                        link.shape(null);
                    }
                }
            }
            Thread.sleep(3000);
            Files.createFile(stopA);
            int producerExit = producer.await(240);
            String out = producer.output();
            assertEquals(0, producerExit, "producer:\n" + out + "\nconsumer:\n" + consumers.getLast().state());
            Files.createFile(stopB);
            assertEquals(0, consumers.getLast().await(60), consumers.getLast().output());

            // Every send has exactly one outcome, and every tensor ends delivered on its last send.
            Map<Integer, TreeMap<Integer, String>> outcomes = new HashMap<>(); // seq -> attempt -> outcome
            Map<Integer, Long> deliveredAt = new HashMap<>();
            for (String line : out.lines().filter(l -> l.startsWith("OUTCOME ")).toList()) {
                String[] f = line.split(" ");
                int seq = Integer.parseInt(f[1]);
                String was = outcomes.computeIfAbsent(seq, s -> new TreeMap<>()).put(Integer.parseInt(f[2]),
                    f[3].equals("DELIVERED") ? "DELIVERED" : f[4]);
                assertEquals(null, was, "two outcomes for one send: " + line);
                if (f[3].equals("DELIVERED")) {
                    deliveredAt.put(seq, Long.parseLong(f[5]));
                }
            }
            int sent = Integer.parseInt(producer.result("sent"));
            int sends = 0;
            for (int seq = 0; seq < sent; seq++) {
                TreeMap<Integer, String> attempts = outcomes.get(seq);
                assertTrue(attempts != null, "no outcome for t" + seq);
                assertEquals(attempts.size() - 1, attempts.lastKey(), "t" + seq + " " + attempts);
                assertEquals("DELIVERED", attempts.lastEntry().getValue(), "t" + seq + " " + attempts);
                assertEquals(1, attempts.values().stream().filter("DELIVERED"::equals).count(), "t" + seq);
                sends += attempts.size();
            }

            // What the handlers saw: intact, never after a definite failure of that send, at most once.
            Map<Integer, Integer> seenBy = new HashMap<>(); // seq -> incarnation that saw it first
            List<String> definiteButSeen = new ArrayList<>();
            List<String> duplicates = new ArrayList<>();
            int acrossTheKill = 0;
            List<Long> firstAfterUp = new ArrayList<>(Collections.nCopies(upAt.size(), Long.MAX_VALUE));
            long firstAfterMove = Long.MAX_VALUE;
            int duringShaping = 0;
            for (int incarnation = 0; incarnation < received.size(); incarnation++) {
                for (String line : Files.readAllLines(received.get(incarnation))) {
                    assertTrue(!line.startsWith("BAD"), "wrong bytes: " + line);
                    String[] f = line.split(" ");
                    int seq = Integer.parseInt(f[0]);
                    int attempt = Integer.parseInt(f[1]);
                    long at = Long.parseLong(f[2]);
                    String outcome = outcomes.getOrDefault(seq, new TreeMap<>()).get(attempt);
                    if (outcome != null && !outcome.equals("DELIVERED")
                        && Delivery.Failure.valueOf(outcome).isDefinite()) {
                        definiteButSeen.add("t" + seq + "/" + attempt + " " + outcome);
                    }
                    Integer first = seenBy.putIfAbsent(seq, incarnation);
                    if (first != null) {
                        if (first == 0 && incarnation == 1) {
                            acrossTheKill++; // the killed process's window died with it: documented
                        } else {
                            duplicates.add("t" + seq + "/" + attempt);
                        }
                    }
                    for (int i = 0; i < upAt.size(); i++) {
                        if (at >= upAt.get(i)) {
                            firstAfterUp.set(i, Math.min(firstAfterUp.get(i), at));
                        }
                    }
                    if (incarnation == received.size() - 1 && movedStartAt > 0) {
                        firstAfterMove = Math.min(firstAfterMove, at);
                    }
                    duringShaping += at >= shaped[0] && at < shaped[1] ? 1 : 0;
                }
            }
            Set<Integer> neverSeen = new HashSet<>();
            for (int seq = 0; seq < sent; seq++) {
                if (!seenBy.containsKey(seq)) {
                    neverSeen.add(seq);
                }
            }
            long lostWithTheKill = 0; // landed in the killed consumer before it died, never read there
            for (int seq : neverSeen) {
                lostWithTheKill += killedAt > 0 && deliveredAt.get(seq) <= killedAt ? 1 : 0;
            }
            List<Long> resumedMs = new ArrayList<>();
            for (int i = 0; i < upAt.size(); i++) {
                resumedMs.add(firstAfterUp.get(i) - upAt.get(i));
            }
            System.out.printf("campaign seed=%d: %d tensors, %d sends (%d reposts), delivered all; handed over twice: %d"
                    + " (%d across the kill); delivered but never read: %d (landed in the killed consumer: %d); read"
                    + " during the 8 s at 1 Gbit/s: %d; resumed %s ms after each link-up, %d ms after the moved"
                    + " consumer started; %s%n", seed, sent, sends, sends - sent, duplicates.size(), acrossTheKill,
                neverSeen.size(), lostWithTheKill, duringShaping, resumedMs, firstAfterMove - movedStartAt,
                producer.result("remoteInDoubt") + " in doubt, " + producer.result("remoteTimedOut") + " timed out");
            List<String> details = out.lines().filter(l -> l.startsWith("DETAIL ")).toList();
            assertTrue(details.stream().noneMatch(l -> l.contains("null")), details.toString());
            assertEquals(List.of(), definiteButSeen, "told a definite failure, yet a handler saw it (seed " + seed + ")");
            assertEquals(List.of(), duplicates, "handed over twice by one consumer process (seed " + seed + ")");
            assertEquals(lostWithTheKill, neverSeen.size(), "delivered, never read, and not by the killed consumer: "
                + neverSeen);
            for (long ms : resumedMs) {
                assertTrue(ms <= 1000, "the stream resumed " + resumedMs + " ms after the link came back (seed "
                    + seed + ")");
            }
            assertTrue(firstAfterMove - movedStartAt <= 5000, "the moved consumer received first "
                + (firstAfterMove - movedStartAt) + " ms after its start (seed " + seed + ")");
            assertTrue(duringShaping > 0, "nothing was read while the link was shaped");
            link.assertNothingLeft();
            producer.deleteLog();
            consumers.forEach(c -> {
                try {
                    c.deleteLog();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
        }
    }
}
