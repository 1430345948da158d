package io.mstar.transport.crossprocess;

import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Real child JVMs killed with SIGKILL mid-run, 20 cycles per case; after each cycle the next start (or
 * reclaim) leaves no file of a dead namespace, and no surviving process ever saw a corrupted tensor.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class CrashTest {
    private static final int CYCLES = 20;
    private static final String[] SMALL_ARENA = {"MSTAR_SHM_ARENA_SEGMENT_MB=8", "MSTAR_SHM_ARENA_MAX_SEGMENTS=4"};

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private final SplittableRandom random = new SplittableRandom(2026);

    // The directory exists only once each test starts.
    private Nodes nodes() {
        return new Nodes(shm.path());
    }

    private ChildJvm consumer(String endpoint, String entity) throws Exception {
        return nodes().consumer(endpoint, entity, 0);
    }

    private ChildJvm producer(String endpoint, String entity, int tensors) throws Exception {
        return nodes().producer(endpoint, entity, "consumer", tensors, random.nextLong(), 8, SMALL_ARENA);
    }

    private String stop(ChildJvm child, String entity, int expectedExit) throws Exception {
        return nodes().stop(child, entity, expectedExit);
    }

    private static void kill(ChildJvm child) throws Exception {
        Nodes.kill(child);
    }

    private void sleepRandom() throws InterruptedException {
        Thread.sleep(150 + random.nextInt(500));
    }

    private void expectNoFilesAfterReclaim() {
        Reclaimer.sweep(shm.path());
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "files of dead owners survived the sweep");
    }

    /**
     * A producer killed mid-send, 20 times, while another producer of the same deployment sends 200 tensors to
     * the same consumer: each survivor finishes, the sweep leaves nothing of the dead one, and the consumer
     * (one process for all the cycles, as a serving worker is) never sees a corrupted tensor.
     */
    @Test
    void producerKilledMidSend() throws Exception {
        Nodes nodes = nodes();
        ChildJvm consumer = nodes.consumer("crash-producer", "consumer", 0, "NODE_TOLERATE_FAILED_FROM=victim");
        for (int cycle = 0; cycle < CYCLES; cycle++) {
            ChildJvm victim = producer("crash-producer", "victim", 1_000_000);
            ChildJvm survivor = producer("crash-producer", "survivor", 200);
            sleepRandom();
            kill(victim);
            assertEquals(0, Nodes.await(survivor, 120, consumer), survivor.output());
            survivor.deleteLog();
            Reclaimer.sweep(shm.path());
            assertEquals(List.of(), ShmTestDir.list(shm.path()).stream().filter(f -> f.contains("_victim")).toList(),
                "cycle " + cycle + ": files of the dead producer survived the sweep");
        }
        String out = stop(consumer, "consumer", 0);
        assertTrue(out.contains(" corrupted=0 failed=0"), out);
        expectNoFilesAfterReclaim();
    }

    @Test
    void consumerKilledMidRead() throws Exception {
        long reclaimedFromDeadConsumer = 0;
        for (int cycle = 0; cycle < CYCLES; cycle++) {
            String endpoint = "crash-consumer-" + cycle;
            ChildJvm consumer = consumer(endpoint, "consumer");
            ChildJvm producer = producer(endpoint, "producer", 3_000);
            // Killed only once tensors flow: a producer slow to start would otherwise find no consumer at all.
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (!consumer.output().contains("FIRST") && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            sleepRandom();
            kill(consumer);
            // The ACKs stop coming: the producer sees the consumer's liveness lock free, frees what it sent
            // there, finishes with nothing in flight and removes what it owns.
            assertEquals(0, producer.await(120), producer.output());
            String out = producer.output();
            producer.deleteLog();
            assertTrue(out.contains("inFlight=0 liveSlots=0"), out);
            reclaimedFromDeadConsumer += Long.parseLong(out.replaceAll("(?s).*deadConsumerReclaims=(\\d+).*", "$1"));
            expectNoFilesAfterReclaim();
        }
        assertTrue(reclaimedFromDeadConsumer > 0, "some cycle killed the consumer with tensors in flight");
    }

    @Test
    void bothKilledAndTheNextStartCleansUp() throws Exception {
        for (int cycle = 0; cycle < CYCLES; cycle++) {
            String endpoint = "crash-both-" + cycle;
            ChildJvm consumer = consumer(endpoint, "consumer");
            ChildJvm producer = producer(endpoint, "producer", 1_000_000);
            sleepRandom();
            kill(producer);
            kill(consumer);
            assertTrue(!ShmTestDir.list(shm.path()).isEmpty(), "a SIGKILL leaves files behind");
            if (cycle % 2 == 0) {
                // The next start of any process in the directory removes them.
                ChildJvm next = consumer("next-" + cycle, "consumer");
                Namespace nextNs = Namespace.of(null, "next-" + cycle);
                assertTrue(ShmTestDir.list(shm.path()).stream().allMatch(f -> f.contains(nextNs.id())),
                    ShmTestDir.list(shm.path()).toString());
                stop(next, "consumer", 0);
                assertEquals(List.of(), ShmTestDir.list(shm.path()));
            } else {
                expectNoFilesAfterReclaim();
            }
        }
    }

    /**
     * One worker of a live deployment killed while its arena grows (1 MiB segments, a high cap) or while it
     * spills (one segment), 20 cycles, while another producer sends to the same consumer throughout: it lives
     * through every kill and ends cleanly, the sweep leaves nothing of the dead worker after each cycle, and the
     * consumer serves throughout without a corrupted or failed tensor of the live one.
     */
    @Test
    void aWorkerOfALiveDeploymentKilledMidGrowthOrMidSpill() throws Exception {
        Nodes nodes = nodes();
        ChildJvm consumer = nodes.consumer("live", "consumer", 3, "NODE_TOLERATE_FAILED_FROM=victim");
        ChildJvm survivor = nodes.producer("live", "survivor", "consumer", Integer.MAX_VALUE, random.nextLong(), 1);
        for (int cycle = 0; cycle < CYCLES; cycle++) {
            boolean spilling = cycle % 2 == 1;
            ChildJvm victim = nodes.producer("live", "victim", "consumer", 1_000_000, random.nextLong(), 1,
                "MSTAR_SHM_ARENA_SEGMENT_MB=1", "MSTAR_SHM_ARENA_MAX_SEGMENTS=" + (spilling ? 1 : 1024));
            String phase = spilling ? "_spill_victim_" : "_arena_victim_";
            while (ShmTestDir.list(shm.path()).stream().filter(f -> f.contains(phase)).count() < 2) {
                assertTrue(victim.process().isAlive(), victim.output());
                Thread.sleep(2);
            }
            sleepRandom();
            kill(victim);
            assertTrue(survivor.process().isAlive(), "the live producer stopped: " + survivor.output());
            List<Reclaimer.Removed> removed = Reclaimer.sweep(shm.path());
            assertTrue(removed.stream().allMatch(r -> r.name().contains("_victim")), "only the dead worker's: " + removed);
            assertEquals(List.of(), ShmTestDir.list(shm.path()).stream().filter(f -> f.contains("_victim")).toList(),
                "cycle " + cycle + ": files of the dead worker survived the sweep");
        }
        nodes.stop(survivor, "survivor", 0);
        String out = nodes.stop(consumer, "consumer", 0);
        assertTrue(out.contains(" corrupted=0 failed=0"), out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void sigtermRemovesEverythingTheProcessOwns() throws Exception {
        ChildJvm consumer = consumer("sigterm", "consumer");
        ChildJvm producer = producer("sigterm", "producer", 1_000_000);
        sleepRandom();
        producer.process().destroy(); // SIGTERM: the shutdown hook closes the transport and the mailbox
        consumer.process().destroy();
        for (ChildJvm child : List.of(producer, consumer)) {
            int exit = child.await(60);
            assertEquals(null, child.crashReport(), "a JVM crashed while its shutdown hook closed under its threads");
            assertEquals(128 + 15, exit, "died of the SIGTERM, after the hooks ran:\n" + child.output());
            child.deleteLog();
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "no reclaim needed after SIGTERM");
    }

    @Test
    void reclaimRemovesOnlyTheDeadDeploymentsFiles() throws Exception {
        ChildJvm live = consumer("live-deployment", "consumer");
        ChildJvm dead = consumer("dead-deployment", "consumer");
        kill(dead);
        String liveId = Namespace.of(null, "live-deployment").id();
        String deadId = Namespace.of(null, "dead-deployment").id();
        List<String> removed = Reclaimer.sweep(shm.path()).stream().map(Reclaimer.Removed::name).toList();
        assertTrue(!removed.isEmpty() && removed.stream().allMatch(f -> f.contains(deadId)), removed.toString());
        List<String> left = ShmTestDir.list(shm.path());
        assertTrue(!left.isEmpty() && left.stream().allMatch(f -> f.contains(liveId)), left.toString());
        stop(live, "consumer", 0);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }
}
