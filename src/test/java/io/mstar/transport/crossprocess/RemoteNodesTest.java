package io.mstar.transport.crossprocess;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Two nodes on one machine (two shared-memory directories, TCP on 127.0.0.1), a producer JVM on
 * node A and a consumer JVM on node B: 10^4 checksummed tensors of 4 KiB to 32 MiB, the consumer SIGKILLed
 * mid-stream and started again. Every tensor is confirmed in the end; every one the consumers read is
 * intact; the only ones they never read had landed in the killed consumer (confirmed before the kill); both
 * directories are empty afterwards.
 */
class RemoteNodesTest {
    private static final int TENSORS = 10_000;
    private static final long SEED = 20261203;

    @Test
    void tensOfThousandsCrossNodesIntactThroughAReceiverKilledAndRestarted() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            Path work = Files.createTempDirectory("mstar-remote-");
            Path received1 = work.resolve("received-1");
            Path received2 = work.resolve("received-2");
            Path acks = work.resolve("acks");
            Path stop = work.resolve("stop");
            Map<String, String> envA = nodes.env(true, RemoteConfig.TIMEOUT_S, "3");
            Map<String, String> envB = nodes.env(false, RemoteConfig.TIMEOUT_S, "3");
            ChildJvm consumer = ChildJvm.start(true, envB, RemoteNode.class, "consumer", received1.toString(),
                stop.toString());
            ChildJvm producer = ChildJvm.start(true, envA, RemoteNode.class, "producer", Integer.toString(TENSORS),
                Long.toString(SEED), acks.toString());
            long deadline = System.nanoTime() + 180_000_000_000L;
            while (lines(received1).size() < TENSORS / 5) {
                if (System.nanoTime() >= deadline || !consumer.process().isAlive() || !producer.process().isAlive()) {
                    fail("the first fifth never arrived:\n" + consumer.state() + "\n" + producer.state());
                }
                Thread.sleep(10);
            }
            long killedAt = System.currentTimeMillis();
            consumer.process().destroyForcibly().waitFor(); // SIGKILL mid-stream
            int beforeKill = lines(received1).size();
            ChildJvm restarted = ChildJvm.start(true, envB, RemoteNode.class, "consumer", received2.toString(),
                stop.toString());
            int producerExit = producer.await(400);
            String producerOut = producer.output();
            assertEquals(0, producerExit, "producer:\n" + producerOut + "\nconsumer:\n" + restarted.state());
            Files.createFile(stop);
            assertEquals(0, restarted.await(60), restarted.output());
            String consumerOut = restarted.output();

            List<String> all = new ArrayList<>(lines(received1));
            all.addAll(lines(received2));
            List<String> bad = all.stream().filter(l -> l.startsWith("BAD")).toList();
            assertEquals(List.of(), bad, "torn or corrupted tensors were delivered");
            Set<Integer> read = new HashSet<>();
            all.forEach(l -> read.add(Integer.parseInt(l.trim())));
            List<String> unreadLandedLate = new ArrayList<>();
            int unreadLandedBeforeKill = 0;
            for (String line : Files.readAllLines(acks)) {
                String[] parts = line.split(" ");
                int seq = Integer.parseInt(parts[0]);
                long ackedAt = Long.parseLong(parts[1]);
                assertTrue(ackedAt > 0, "tensor " + seq + " never confirmed");
                if (!read.contains(seq)) {
                    // Landed in the killed consumer and never read: its confirmation predates the kill. The
                    // producer notes it when it next polls, which a send to the dead node delays by up to the
                    // timeout (3 s) more than once; 8 s of slack in all, for a busy machine.
                    if (ackedAt > killedAt + 8000) {
                        unreadLandedLate.add(seq + "@+" + (ackedAt - killedAt) + "ms");
                    } else {
                        unreadLandedBeforeKill++;
                    }
                }
            }
            assertEquals(List.of(), unreadLandedLate, "tensors confirmed after the kill that no consumer read");
            System.out.printf("remote kill test: %d tensors, %d read before the kill, %d read in all (%d duplicates),"
                    + " %d landed in the killed consumer unread%n  producer: %s%n  consumer: %s%n", TENSORS, beforeKill,
                read.size(), all.size() - read.size(), unreadLandedBeforeKill, producer.result("confirmed") + " "
                    + resultLine(producerOut), resultLine(consumerOut));
            producer.deleteLog();
            restarted.deleteLog();
            ShmTestDir.deleteTree(work);
        }
    }

    @Test
    void theReadmesProducerAndConsumerRunOnTwoNodesUnchanged() throws Exception {
        try (TwoNodes nodes = new TwoNodes("producer", "consumer")) {
            ChildJvm consumer = ChildJvm.start(true, nodes.env(false), quickstart.Consumer.class);
            ChildJvm producer = ChildJvm.start(true, nodes.env(true), quickstart.Producer.class);
            assertEquals(0, producer.await(120), producer.output() + "\nconsumer:\n" + consumer.state());
            assertEquals(0, consumer.await(60), consumer.output());
            assertTrue(producer.output().contains("producer: Delivery[requestId=request-1, DELIVERED]"), producer.output());
            assertTrue(consumer.output().contains("consumer: request-1 from producer, F32 602112 bytes"), consumer.output());
            producer.deleteLog();
            consumer.deleteLog();
        }
    }

    private static List<String> lines(Path file) throws java.io.IOException {
        if (!Files.exists(file)) {
            return List.of();
        }
        List<String> lines = Files.readAllLines(file);
        // The killed consumer may have died mid-line.
        return lines.isEmpty() || Files.readString(file).endsWith("\n") ? lines : lines.subList(0, lines.size() - 1);
    }

    private static String resultLine(String output) {
        return output.lines().filter(l -> l.startsWith("RESULT ")).findFirst().orElse("(no RESULT line)");
    }
}
