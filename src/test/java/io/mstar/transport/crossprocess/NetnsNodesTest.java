package io.mstar.transport.crossprocess;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two nodes with a real network between them: two network namespaces joined by a veth pair, each node's JVM
 * inside its own, addresses that exist only there. The link goes down mid-stream for longer than the
 * timeout and comes back: the producer is told of the tensors that timed out (they are freed and it sends
 * them again), nothing read is corrupted, nothing is left in either directory, and the stream resumes by
 * itself. Needs root and {@code ip netns}; skipped, saying so, without them.
 */
class NetnsNodesTest {
    private static final int TENSORS = 2000;

    @Test
    void theLinkGoesDownLongerThanTheTimeoutAndTheStreamResumesOnItsOwn() throws Exception {
        String tag = Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0xffff));
        String nsA = "mstar-a-" + tag;
        String nsB = "mstar-b-" + tag;
        Assumptions.assumeTrue(run("ip", "netns", "add", nsA) == 0,
            "skipped: network namespaces need root and iproute2 (ip netns add failed)");
        Path dirA = Files.createTempDirectory(ShmTestDir.SHM, "mstar-netnsA-");
        Path dirB = Files.createTempDirectory(ShmTestDir.SHM, "mstar-netnsB-");
        Path work = Files.createTempDirectory("mstar-netns-");
        try {
            int subnet = ThreadLocalRandom.current().nextInt(1, 250);
            String ipA = "10.213." + subnet + ".1";
            String ipB = "10.213." + subnet + ".2";
            assertEquals(0, run("ip", "netns", "add", nsB));
            assertEquals(0, run("ip", "link", "add", "mva" + tag, "netns", nsA, "type", "veth", "peer", "name",
                "mvb" + tag, "netns", nsB));
            assertEquals(0, run("ip", "-n", nsA, "addr", "add", ipA + "/24", "dev", "mva" + tag));
            assertEquals(0, run("ip", "-n", nsB, "addr", "add", ipB + "/24", "dev", "mvb" + tag));
            for (String[] up : new String[][] {{nsA, "mva" + tag}, {nsB, "mvb" + tag}, {nsA, "lo"}, {nsB, "lo"}}) {
                assertEquals(0, run("ip", "-n", up[0], "link", "set", up[1], "up"));
            }
            String entities = "prefill=" + ipA + ":40123,decode=" + ipB + ":40123";
            Map<String, String> envA = env(dirA, ipA + ":40123", entities);
            Map<String, String> envB = env(dirB, ipB + ":40123", entities);
            Path received = work.resolve("received");
            Path acks = work.resolve("acks");
            Path stop = work.resolve("stop");
            ChildJvm consumer = ChildJvm.startUnder(List.of("ip", "netns", "exec", nsB), true, List.of(), envB,
                RemoteNode.class, "consumer", received.toString(), stop.toString());
            ChildJvm producer = ChildJvm.startUnder(List.of("ip", "netns", "exec", nsA), true, List.of(), envA,
                RemoteNode.class, "producer", Integer.toString(TENSORS), "20261204", acks.toString());
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (lines(received) < TENSORS / 5) {
                assertTrue(System.nanoTime() < deadline && producer.process().isAlive(),
                    "the first fifth never arrived:\n" + consumer.state() + "\n" + producer.state());
                Thread.sleep(10);
            }
            assertEquals(0, run("ip", "-n", nsA, "link", "set", "mva" + tag, "down")); // mid-stream
            int atDown = lines(received);
            Thread.sleep(5_000); // longer than the timeout (2 s)
            int whileDown = lines(received) - atDown;
            assertEquals(0, run("ip", "-n", nsA, "link", "set", "mva" + tag, "up"));
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
            assertEquals(List.of(), ShmTestDir.list(dirA), "files left on node A");
            assertEquals(List.of(), ShmTestDir.list(dirB), "files left on node B");
            producer.deleteLog();
            consumer.deleteLog();
        } finally {
            run("ip", "netns", "del", nsA); // kills the processes' network; their parent watch ends them
            run("ip", "netns", "del", nsB);
            ShmTestDir.deleteTree(dirA);
            ShmTestDir.deleteTree(dirB);
            ShmTestDir.deleteTree(work);
        }
    }

    private static Map<String, String> env(Path dir, String listen, String entities) {
        return Map.of(TransportConfig.SHM_DIR, dir.toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "64", RemoteConfig.LISTEN, listen, RemoteConfig.ENTITIES, entities,
            RemoteConfig.SECRET, TwoNodes.SECRET, RemoteConfig.TIMEOUT_S, "2");
    }

    private static long counter(String output, String name) {
        Matcher m = Pattern.compile("\\b" + name + "=(\\d+)").matcher(output);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }

    private static int lines(Path file) throws IOException {
        return Files.exists(file) ? (int) Files.readString(file).chars().filter(c -> c == '\n').count() : 0;
    }

    private static int run(String... command) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(command));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return -1;
        }
        if (p.exitValue() != 0) {
            System.out.println(String.join(" ", command) + ": " + out.strip());
        }
        return p.exitValue();
    }
}
