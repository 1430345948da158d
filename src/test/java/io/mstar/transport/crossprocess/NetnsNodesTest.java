package io.mstar.transport.crossprocess;

import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.VethLink;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Two nodes with a real network between them: two network namespaces joined by a veth pair, each node's JVM
 * inside its own, addresses that exist only there. The link goes down mid-stream for longer than the
 * timeout and comes back: the producer is told of the tensors that timed out (they are freed and it sends
 * them again), nothing read is corrupted, nothing is left in either directory, and the stream resumes by
 * itself; a steady producer sees one failure per send at its timeout through a partition, not a storm. Needs root
 * and {@code ip netns}; skipped, saying so, without them.
 */
@Tag("long")
class NetnsNodesTest {
    private static final int TENSORS = 2000;

    @Test
    void theLinkGoesDownLongerThanTheTimeoutAndTheStreamResumesOnItsOwn() throws Exception {
        try (VethLink link = VethLink.create()) {
            Path received = link.work.resolve("received");
            Path acks = link.work.resolve("acks");
            Path stop = link.work.resolve("stop");
            ChildJvm consumer = link.startB(RemoteNode.class, Map.of(), "consumer", received.toString(), stop.toString());
            ChildJvm producer = link.startA(RemoteNode.class, Map.of(), "producer", Integer.toString(TENSORS), "20261204",
                acks.toString());
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (lines(received) < TENSORS / 5) {
                if (System.nanoTime() >= deadline || !producer.process().isAlive()) {
                    fail("the first fifth never arrived:\n" + consumer.state() + "\n" + producer.state());
                }
                Thread.sleep(10);
            }
            link.down(); // mid-stream
            int atDown = lines(received);
            Thread.sleep(5_000); // longer than the timeout (2 s)
            int whileDown = lines(received) - atDown;
            link.up();
            int producerExit = producer.await(300);
            String producerOut = producer.output();
            assertEquals(0, producerExit, "producer:\n" + producerOut + "\nconsumer:\n" + consumer.state());
            Files.createFile(stop);
            assertEquals(0, consumer.await(60), consumer.output());
            List<String> all = Files.readAllLines(received);
            assertEquals(List.of(), all.stream().filter(l -> l.startsWith("BAD")).toList(), "corrupted tensors");
            Set<Integer> read = new HashSet<>();
            all.forEach(l -> read.add(Integer.parseInt(l.trim())));
            long timedOut = counter(producerOut, "remoteTimedOut");
            long freed = counter(producerOut, "deadConsumerReclaims");
            System.out.printf("netns test: %d tensors, %d read (%d during the 5 s the link was down), %d timed out and"
                + " freed (%d), confirmed %s%n", TENSORS, read.size(), whileDown, timedOut, freed, producer.result("confirmed"));
            assertTrue(timedOut > 0, "no tensor timed out while the link was down:\n" + producerOut);
            assertTrue(freed > 0, "the tensors that timed out were not freed as a dead consumer's:\n" + producerOut);
            assertEquals(0, counter(producerOut, "inFlight"), producerOut);
            link.assertNothingLeft();
            producer.deleteLog();
            consumer.deleteLog();
        }
    }

    /**
     * A producer that sends 50 tensors a second, each awaited, through a partition several timeouts long
     * ({@code -Dmstar.test.partitionS}, 10 s by default; 2 s timeout): each send has one outcome, a failure comes
     * no sooner than the timeout and says since when the peer is unreachable and why (no "null"), the failures are
     * a few (one per timeout), not a storm of one per try, and the stream resumes within a second of the link's
     * return. Every tensor told DELIVERED was read intact.
     */
    @Test
    void aSteadyProducerFailsEachSendOnceAtItsTimeoutThroughAPartitionAndResumesWithinASecond() throws Exception {
        long partitionMs = Long.getLong("mstar.test.partitionS", 10) * 1000;
        long timeoutMs = 2000;
        try (VethLink link = VethLink.create()) {
            Path received = link.work.resolve("received");
            Path stop = link.work.resolve("stop");
            ChildJvm consumer = link.startB(RemoteNode.class, Map.of(), "consumer", received.toString(), stop.toString());
            ChildJvm producer = link.startA(SteadyProducer.class, Map.of(), stop.toString());
            producer.awaitOutput("OUTCOME 100 ", 120);
            link.down();
            long downAt = System.currentTimeMillis();
            Thread.sleep(partitionMs);
            link.up();
            long upAt = System.currentTimeMillis();
            Thread.sleep(3000);
            Files.createFile(stop);
            assertEquals(0, producer.await(120), producer.output());
            assertEquals(0, consumer.await(60), consumer.output());
            String out = producer.output();
            List<long[]> failures = new ArrayList<>(); // {seq, startMs, endMs, tookMs}
            long resumedAt = -1;
            Set<Integer> delivered = new HashSet<>();
            for (String line : out.lines().filter(l -> l.startsWith("OUTCOME ")).toList()) {
                String[] f = line.split(" ");
                long[] o = {Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4])};
                if (f[5].equals("FAILED")) {
                    failures.add(o);
                } else {
                    assertEquals("DELIVERED", f[5], line);
                    delivered.add((int) o[0]);
                    if (resumedAt < 0 && o[2] >= upAt) {
                        resumedAt = o[2];
                    }
                }
            }
            System.out.printf("partition test: %d ms down, %d sends, %d failed (each after %s ms), resumed %d ms after"
                + " the link came back%n", partitionMs, delivered.size() + failures.size(), failures.size(),
                failures.stream().map(o -> Long.toString(o[3])).toList(), resumedAt - upAt);
            assertTrue(!failures.isEmpty(), "nothing failed while the link was down:\n" + out);
            for (long[] o : failures) {
                assertTrue(o[3] >= timeoutMs, "send " + o[0] + " failed after " + o[3] + " ms, before its timeout:\n" + out);
            }
            assertTrue(failures.size() <= partitionMs / timeoutMs + 2, failures.size() + " failures in " + partitionMs
                + " ms: a storm, not one per timeout");
            assertTrue(resumedAt >= 0 && resumedAt - upAt <= 1000, "the stream resumed " + (resumedAt - upAt)
                + " ms after the link came back (down at " + downAt + ")");
            List<String> details = out.lines().filter(l -> l.startsWith("DETAIL ")).toList();
            assertTrue(details.stream().noneMatch(l -> l.contains("null")), details.toString());
            assertTrue(details.stream().anyMatch(l -> l.contains("unreachable since")), details.toString());
            Set<Integer> read = new HashSet<>();
            for (String l : Files.readAllLines(received)) {
                assertTrue(!l.startsWith("BAD"), "a corrupted tensor: " + l);
                read.add(Integer.parseInt(l.trim()));
            }
            assertTrue(read.containsAll(delivered), "a tensor told DELIVERED was never read");
            link.assertNothingLeft();
            producer.deleteLog();
            consumer.deleteLog();
        }
    }

    private static long counter(String output, String name) {
        Matcher m = Pattern.compile("\\b" + name + "=(\\d+)").matcher(output);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    private static int lines(Path file) throws IOException {
        return Files.exists(file) ? (int) Files.readString(file).chars().filter(c -> c == '\n').count() : 0;
    }
}
