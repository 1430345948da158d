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

    /**
     * Freeing on the first ACK (a test-only seam) reuses slots under the slow reader: the slots' stamps make it
     * refuse those tensors, never read them as good. Negative control: without the stamp check too, it reads
     * overwritten bytes.
     */
    @Test
    void withoutPerConsumerCountingTheSlowReaderRefusesReusedSlotsAndWithoutTheStampSeesCorruption() throws Exception {
        String refused = slowReaderAfterFirstAckFrees(List.of("-Dmstar.test.fanOutFirstAckFrees=true"));
        assertTrue(count(refused, "corrupted") == 0 && count(refused, "failed") > 0
            && refused.contains("StaleTensorException"), refused);
        String corrupted = slowReaderAfterFirstAckFrees(List.of("-Dmstar.test.fanOutFirstAckFrees=true",
            "-Dmstar.test.noStampCheck=true"));
        assertTrue(count(corrupted, "corrupted") > 0, corrupted);
        System.out.println("the slow reader refused " + count(refused, "failed") + " reused slots of 2000; without the"
            + " stamp check it read " + count(corrupted, "corrupted") + " corrupted tensors");
    }

    private String slowReaderAfterFirstAckFrees(List<String> seams) throws Exception {
        Nodes nodes = new Nodes(shm.path());
        ChildJvm fast = nodes.consumer("fan", "fast", 0);
        ChildJvm slow = nodes.consumer(seams, "fan", "slow", 0, "NODE_READ_DELAY_MS=3");
        ChildJvm producer = nodes.producer(seams, "fan", "producer", "fast,slow", 2_000, 12, 1, SMALL_ARENA);
        producer.await(300);
        producer.deleteLog();
        Nodes.kill(fast);
        String slowOut = nodes.stop(slow, "slow", 1);
        Reclaimer.sweep(shm.path());
        return slowOut;
    }

    private static long count(String out, String key) {
        Matcher m = Pattern.compile(key + "=(\\d+)").matcher(out);
        return m.find() ? Long.parseLong(m.group(1)) : -1;
    }
}
