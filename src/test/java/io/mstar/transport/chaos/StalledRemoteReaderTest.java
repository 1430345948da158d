package io.mstar.transport.chaos;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A consumer on another node stops reading its socket (SIGSTOP); the producer's tensors to it time out and
 * their slots go to tensors for a local consumer. When the reader resumes, it must receive none of those
 * other tensors' bytes: the slot of a queued write is held until the write is done, and a timed-out connection
 * is closed before its tensors' slots are freed. The negative control turns both off (a test-only seam): the
 * resumed reader is then sent another tensor's bytes under its old header, which its node refuses on the
 * checksum (the bytes crossed the network all the same).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class StalledRemoteReaderTest {
    private static final String LEAK = "do not match their checksum";

    @Test
    void aStalledRemoteReaderReceivesNoneOfAnotherTensorsBytes() throws Exception {
        String slow = run(List.of());
        assertFalse(slow.contains(LEAK), "the stalled reader was sent a reused slot's bytes:\n" + slow);
        assertFalse(slow.contains("BAD "), slow);
    }

    @Test
    void withoutTheWriteHoldTheStalledReaderIsSentAnotherTensorsBytes() throws Exception {
        String slow = run(List.of("-Dmstar.test.noWriteHold=true"));
        assertTrue(slow.contains(LEAK), "negative control: the reused slot's bytes should reach it:\n" + slow);
        System.out.println("negative control: " + slow.lines().filter(l -> l.contains(LEAK)).findFirst().orElseThrow());
    }

    // Returns what the stalled reader printed.
    private static String run(List<String> seams) throws Exception {
        try (TwoNodes nodes = new TwoNodes("p", "slow")) {
            Path go = Files.createTempFile("mstar-stalled-go-", "");
            Files.delete(go);
            Map<String, String> bEnv = nodes.env(false, RemoteConfig.TIMEOUT_S, "1", TransportConfig.MAX_SEGMENTS, "4");
            Map<String, String> aEnv = nodes.env(true, RemoteConfig.TIMEOUT_S, "1", TransportConfig.MAX_SEGMENTS, "4");
            Map<String, String> fastEnv = Map.of(TransportConfig.SHM_DIR, nodes.dirA.toString(),
                TransportConfig.ARENA, "1");
            ChildJvm slow = ChildJvm.start(true, seams, bEnv, ChaosWorker.class, "consumer", "slow", "1");
            ChildJvm fast = ChildJvm.start(true, seams, fastEnv, ChaosWorker.class, "consumer", "fast", "2");
            List<String> producerOptions = new ArrayList<>(seams);
            producerOptions.add("-Dstalled.mb=" + Long.getLong("stalled.mb", 32));
            producerOptions.add("-Dstalled.count=" + Integer.getInteger("stalled.count", 3));
            ChildJvm producer = ChildJvm.start(true, producerOptions, aEnv, StalledReaderProducer.class, go.toString());
            try {
                producer.awaitOutput("READY p", 90);
                slow.signal("STOP");
                Files.createFile(go);
                producer.awaitOutput("DONE", 90);
                slow.signal("CONT");
                assertEquals(0, producer.await(60), producer.output());
                assertTrue(producer.output().contains("FAST DELIVERED"), producer.output());
                Thread.sleep(1000);
                return slow.output();
            } finally {
                Files.deleteIfExists(go);
                for (ChildJvm child : List.of(slow, fast)) {
                    child.process().destroy();
                    child.await(30);
                }
                producer.process().destroyForcibly().waitFor();
            }
        }
    }
}
