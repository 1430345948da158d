package io.mstar.transport.crossprocess;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Entities placed by name: the map says {@code consumer=consumer-node:PORT}, and the names resolve through a
 * hosts file of the test's ({@code -Djdk.net.hosts.file}, no cache). The consumer runs at 127.0.0.1, is killed,
 * and comes back at 127.0.0.2 under the same name (the hosts file changed, no map did): the producer, which kept
 * posting, is told DELIVERED again within 5 s of the new consumer's start.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class NodeMovedTest {
    @Test
    void aConsumerRestartedAtANewAddressUnderTheSameNameReceivesAgainWithNoMapChanged() throws Exception {
        Path hosts = Files.createTempFile("mstar-hosts-", ".txt");
        Path dirA = Files.createTempDirectory(ShmTestDir.SHM, "mstar-moveA-");
        Path dirB = Files.createTempDirectory(ShmTestDir.SHM, "mstar-moveB-");
        int consumerPort;
        int producerPort;
        try (ServerSocket a = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             ServerSocket b = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            consumerPort = a.getLocalPort();
            producerPort = b.getLocalPort();
        }
        String map = "consumer=consumer-node:" + consumerPort + ",producer=producer-node:" + producerPort;
        List<String> jvm = List.of("-Djdk.net.hosts.file=" + hosts, "-Dsun.net.inetaddr.ttl=0",
            "-Dsun.net.inetaddr.negative.ttl=0");
        writeHosts(hosts, "127.0.0.1 consumer-node\n127.0.0.1 producer-node\n");
        ChildJvm producer = null;
        ChildJvm consumer = null;
        ChildJvm moved = null;
        try {
            consumer = ChildJvm.start(true, jvm, env(dirB, map, "127.0.0.1:" + consumerPort), MovingNode.class, "consumer");
            consumer.awaitOutput("READY", 60);
            producer = ChildJvm.start(true, jvm, env(dirA, map, "127.0.0.1:" + producerPort), MovingNode.class, "producer");
            producer.awaitOutput("DELIVERED", 60);

            consumer.process().destroyForcibly().waitFor(); // the pod goes ...
            ShmTestDir.deleteTree(dirB);
            Files.createDirectories(dirB);
            writeHosts(hosts, "127.0.0.2 consumer-node\n127.0.0.1 producer-node\n"); // ... and comes back elsewhere
            int deliveredBefore = count(producer.output(), "DELIVERED");
            moved = ChildJvm.start(true, jvm, env(dirB, map, "127.0.0.2:" + consumerPort), MovingNode.class, "consumer");
            moved.awaitOutput("READY", 60);
            long startedMs = Long.parseLong(moved.output().lines().filter(l -> l.startsWith("READY")).findFirst()
                .orElseThrow().substring(6));
            long deadline = System.currentTimeMillis() + 30_000;
            while (firstDeliveredAfter(producer.output(), deliveredBefore) < 0 && System.currentTimeMillis() < deadline) {
                Thread.sleep(50);
            }
            long firstMs = firstDeliveredAfter(producer.output(), deliveredBefore);
            System.out.println("the consumer moved from 127.0.0.1 to 127.0.0.2 under its name: first DELIVERED "
                + (firstMs - startedMs) + " ms after it started there");
            assertTrue(firstMs >= 0 && firstMs - startedMs <= 5000, "no delivery within 5 s of the move:\n"
                + producer.state());
        } finally {
            for (ChildJvm c : new ChildJvm[] {producer, consumer, moved}) {
                if (c != null) {
                    c.process().destroy();
                    c.await(60);
                    c.deleteLog();
                }
            }
            ShmTestDir.deleteTree(dirA);
            ShmTestDir.deleteTree(dirB);
            Files.deleteIfExists(hosts);
        }
    }

    private static Map<String, String> env(Path dir, String map, String listen) {
        return Map.of(TransportConfig.SHM_DIR, dir.toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2", RemoteConfig.ENTITIES, map,
            RemoteConfig.LISTEN, listen, RemoteConfig.SECRET, TwoNodes.SECRET, RemoteConfig.TIMEOUT_S, "2");
    }

    // Replaced whole (a new file moved over the old), so no lookup reads it half written.
    private static void writeHosts(Path hosts, String content) throws java.io.IOException {
        Path next = Files.writeString(hosts.resolveSibling(hosts.getFileName() + ".next"), content);
        Files.move(next, hosts, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    private static int count(String output, String prefix) {
        return (int) output.lines().filter(l -> l.startsWith(prefix)).count();
    }

    // The wall time of the first DELIVERED line past the first `skip` of them, or -1.
    private static long firstDeliveredAfter(String output, int skip) {
        return output.lines().filter(l -> l.startsWith("DELIVERED")).skip(skip).findFirst()
            .map(l -> Long.parseLong(l.substring(10))).orElse(-1L);
    }
}
