package io.mstar.transport.crossprocess;

import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One tensor stream read by three consumer processes (fan-out): one ACKs at once, one reads each batch
 * only after the first ACK of it has reached the producer, one is SIGKILLed mid-read. A small arena makes
 * the producer reuse freed space at once, so a slot freed on the first ACK would be overwritten under the
 * slow reader.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class FanOutTest {
    private static final String[] SMALL_ARENA = {"MSTAR_SHM_ARENA_SEGMENT_MB=1", "MSTAR_SHM_ARENA_MAX_SEGMENTS=2",
        "NODE_FANOUT=1"};

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void threeConsumersOfOneStreamNeverReadACorruptedTensor() throws Exception {
        Nodes nodes = new Nodes(shm.path());
        ChildJvm fast = nodes.consumer("fan", "fast", 0);
        ChildJvm slow = nodes.consumer("fan", "slow", 0, "NODE_READ_DELAY_MS=3");
        ChildJvm victim = nodes.consumer("fan", "victim", 0);
        ChildJvm producer = nodes.producer(List.of(), "fan", "producer", "fast,slow,victim", 10_000, 11, 1, SMALL_ARENA);
        Thread.sleep(1000);
        Nodes.kill(victim); // mid-read: its share of every tensor it held is released

        String producerOut = Nodes.expectExit(producer, 0);
        assertTrue(producerOut.contains("sent=10000 inFlight=0 liveSlots=0"), "every slot freed:\n" + producerOut);
        for (ChildJvm consumer : List.of(fast, slow)) {
            String entity = consumer == fast ? "fast" : "slow";
            String out = nodes.stop(consumer, entity, 0);
            assertTrue(out.contains("received=10000 corrupted=0 failed=0"), entity + ":\n" + out);
        }
        List<String> left = ShmTestDir.list(shm.path());
        assertTrue(left.stream().allMatch(f -> f.startsWith("mstar_" + Namespace.of(null, "fan").id())
            && f.contains("_victim")), "only the killed consumer's files, until the next sweep: " + left);
        Reclaimer.sweep(shm.path());
    }

    /** Negative control: freeing on the first ACK (a test-only seam) lets the slow reader see overwritten bytes. */
    @Test
    void withoutPerConsumerCountingTheSlowReaderSeesCorruption() throws Exception {
        Nodes nodes = new Nodes(shm.path());
        ChildJvm fast = nodes.consumer("fan", "fast", 0);
        ChildJvm slow = nodes.consumer("fan", "slow", 0, "NODE_READ_DELAY_MS=3");
        ChildJvm producer = nodes.producer(List.of("-Dmstar.test.fanOutFirstAckFrees=true"), "fan", "producer",
            "fast,slow", 2_000, 12, 1, SMALL_ARENA);
        producer.await(300);
        producer.deleteLog();
        Nodes.kill(fast);
        String slowOut = nodes.stop(slow, "slow", 1);
        Matcher corrupted = Pattern.compile("corrupted=(\\d+)").matcher(slowOut);
        assertTrue(corrupted.find() && Long.parseLong(corrupted.group(1)) > 0, slowOut);
        System.out.println("negative control: the slow reader saw " + corrupted.group(1) + " corrupted tensors of 2000");
        Reclaimer.sweep(shm.path());
    }
}
