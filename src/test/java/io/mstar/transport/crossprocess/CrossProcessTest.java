package io.mstar.transport.crossprocess;

import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Real child JVMs exchanging tensors through real shared-memory files and the built-in mailbox; every
 * payload is checked against the checksum its producer computed.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class CrossProcessTest {
    private static final int TENSORS = 10_000;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private ChildJvm consumer(String entity, long expected, long delayMs, String... env) throws Exception {
        List<String> args = new ArrayList<>(List.of("consumer", shm.path().toString(), "xproc", entity,
            Long.toString(expected), Long.toString(delayMs)));
        args.addAll(List.of(env));
        return ChildJvm.start(Node.class, args.toArray(String[]::new));
    }

    private ChildJvm producer(String entity, String consumers, int tensors, long seed, int maxMb, String... env)
        throws Exception {
        List<String> args = new ArrayList<>(List.of("producer", shm.path().toString(), "xproc", entity, consumers,
            Integer.toString(tensors), Long.toString(seed), Integer.toString(maxMb)));
        args.addAll(List.of(env));
        return ChildJvm.start(Node.class, args.toArray(String[]::new));
    }

    /** Waits for a zero exit and returns what the child printed. */
    private static String expectSuccess(ChildJvm child, String role) throws Exception {
        int code = child.await(480);
        String out = child.output();
        assertEquals(0, code, role + " failed; output:\n" + out);
        child.deleteLog();
        return out;
    }

    @Test
    void severalProducersIntoOneConsumer() throws Exception {
        ChildJvm consumer = consumer("consumer", TENSORS, 0);
        List<ChildJvm> producers = new ArrayList<>();
        int each = TENSORS / 4;
        for (int p = 0; p < 4; p++) {
            producers.add(producer("producer-" + p, "consumer", each, 100 + p, 64,
                "MSTAR_SHM_ARENA_SEGMENT_MB=32", "MSTAR_SHM_ARENA_MAX_SEGMENTS=4"));
        }
        for (ChildJvm p : producers) {
            String out = expectSuccess(p, "producer");
            assertTrue(out.contains("inFlight=0 liveSlots=0"), out);
        }
        String out = expectSuccess(consumer, "consumer");
        assertTrue(out.contains("RESULT received=" + TENSORS + " corrupted=0 failed=0"), out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "every file is gone once the processes stopped");
    }

    @Test
    void oneProducerIntoSeveralConsumers() throws Exception {
        List<ChildJvm> consumers = new ArrayList<>();
        long[] expected = Node.expectedPerConsumer(7, TENSORS, 3);
        for (int c = 0; c < 3; c++) {
            consumers.add(consumer("consumer-" + c, expected[c], 0));
        }
        ChildJvm producer = producer("producer", "consumer-0,consumer-1,consumer-2", TENSORS, 7, 64,
            "MSTAR_SHM_ARENA_SEGMENT_MB=32", "MSTAR_SHM_ARENA_MAX_SEGMENTS=4");
        expectSuccess(producer, "producer");
        for (int c = 0; c < 3; c++) {
            String out = expectSuccess(consumers.get(c), "consumer");
            assertTrue(out.contains("RESULT received=" + expected[c] + " corrupted=0 failed=0"), out);
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void aConsumerReadsEveryPlacementWhateverItsOwnArenaKnob() throws Exception {
        // A file-transport consumer (MSTAR_SHM_ARENA=0) of an arena producer, then an arena consumer of a file producer.
        ChildJvm fileConsumer = consumer("file-consumer", 2000, 0, "MSTAR_SHM_ARENA=0");
        ChildJvm arenaProducer = producer("arena-producer", "file-consumer", 2000, 11, 4,
            "MSTAR_SHM_ARENA_SEGMENT_MB=8", "MSTAR_SHM_ARENA_MAX_SEGMENTS=2");
        expectSuccess(arenaProducer, "arena producer");
        String out = expectSuccess(fileConsumer, "file-transport consumer");
        assertTrue(out.contains("RESULT received=2000 corrupted=0 failed=0"), out);

        ChildJvm arenaConsumer = consumer("arena-consumer", 500, 0);
        ChildJvm fileProducer = producer("file-producer", "arena-consumer", 500, 12, 1, "MSTAR_SHM_ARENA=0");
        expectSuccess(fileProducer, "file producer");
        out = expectSuccess(arenaConsumer, "arena consumer");
        assertTrue(out.contains("RESULT received=500 corrupted=0 failed=0"), out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void heldAtTheCapItWaitsThenSpillsAndEverythingArrives() throws Exception {
        ChildJvm consumer = consumer("consumer", 400, 20);
        ChildJvm producer = producer("producer", "consumer", 400, 3, 1,
            "MSTAR_SHM_ARENA_SEGMENT_MB=1", "MSTAR_SHM_ARENA_MAX_SEGMENTS=2", "MSTAR_SHM_ARENA_SPILL_AFTER_S=0.005");
        String out = expectSuccess(producer, "producer");
        expectSuccess(consumer, "consumer");
        long spills = Long.parseLong(value(out, "spills"));
        long waits = Long.parseLong(value(out, "waits"));
        assertTrue(spills > 0 && waits > 0, "the slow consumer should force waits and spills: " + out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void strictModeAtTheCapEndsWithTheClearException() throws Exception {
        // The consumer never ACKs within the timeout: it sleeps 60 s after its first batch.
        ChildJvm consumer = consumer("consumer", 1, 60_000);
        ChildJvm producer = producer("producer", "consumer", 400, 4, 1,
            "MSTAR_SHM_ARENA_SEGMENT_MB=1", "MSTAR_SHM_ARENA_MAX_SEGMENTS=1", "MSTAR_SHM_ARENA_SPILL=0",
            "MSTAR_SHM_ARENA_FULL_TIMEOUT_S=0.5");
        assertEquals(3, producer.await(120), producer.output());
        assertEquals("true", producer.result("capacity-exception"), producer.output());
        assertTrue(producer.output().contains("strict_mode"), producer.output());
        consumer.process().destroyForcibly().waitFor();
        producer.deleteLog();
        consumer.deleteLog();
        // The killed consumer left its mailbox and its stats file (it only received: it made no segment); the
        // sweep removes them.
        List<String> left = ShmTestDir.list(shm.path());
        assertEquals(2, left.size(), left.toString());
        assertTrue(left.stream().anyMatch(n -> n.contains("_mailbox_consumer"))
            && left.stream().anyMatch(n -> n.contains("_stats_consumer_")), left.toString());
        assertEquals(left, Reclaimer.sweep(shm.path()).stream()
            .map(Reclaimer.Removed::name).toList());
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void withoutTheExportFlagTheMailboxNamesIt() throws Exception {
        ChildJvm child = ChildJvm.start(false, Node.class, "consumer", shm.path().toString(), "xproc", "c", "1", "0");
        int code = child.await(60);
        String out = child.output();
        assertTrue(code != 0 && out.contains("--add-exports java.base/jdk.internal.misc=ALL-UNNAMED"), out);
        child.deleteLog();
    }

    private static String value(String output, String key) {
        for (String part : output.replace('\n', ' ').split(" ")) {
            if (part.startsWith(key + "=")) {
                return part.substring(key.length() + 1);
            }
        }
        throw new AssertionError("no " + key + " in:\n" + output);
    }
}
