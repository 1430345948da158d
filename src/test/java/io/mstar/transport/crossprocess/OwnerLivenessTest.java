package io.mstar.transport.crossprocess;

import io.mstar.transport.cli.MstarShm;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Liveness per owner, with real processes and SIGKILL: a dead worker of a live deployment is swept while
 * the rest serves, files deleted by hand never make a live owner look dead, and workers restarted under
 * their entity take their place.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class OwnerLivenessTest {
    private static final String SMALL_SEGMENTS = "MSTAR_SHM_ARENA_SEGMENT_MB=2";

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private Nodes nodes() {
        return new Nodes(shm.path());
    }

    private List<String> files(String containing) {
        return ShmTestDir.list(shm.path()).stream().filter(f -> f.contains(containing)).toList();
    }

    private void awaitFile(String containing) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (files(containing).isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "no file containing " + containing);
            Thread.sleep(5);
        }
    }

    @Test
    void aDeadWorkerOfALiveDeploymentIsSweptWhileTheRestServes() throws Exception {
        Nodes nodes = nodes();
        ChildJvm consumer = nodes.consumer("sweep", "consumer", 0, "MSTAR_SHM_RECLAIM_INTERVAL_S=0.5",
            "NODE_TOLERATE_FAILED_FROM=worker");
        ChildJvm worker = nodes.producer("sweep", "worker", "consumer", 1_000_000, 1, 1, SMALL_SEGMENTS);
        awaitFile("_arena_worker_");
        Nodes.kill(worker);

        // No reclaim command, no restart: the live consumer's periodic sweep removes the dead worker's files.
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!files("_worker").isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "the dead worker's files stayed: " + files("_worker"));
            Thread.sleep(20);
        }
        ChildJvm survivor = nodes.producer("sweep", "survivor", "consumer", 500, 2, 1, SMALL_SEGMENTS);
        Nodes.expectExit(survivor, 0);
        String out = nodes.stop(consumer, "consumer", 0);
        assertTrue(out.contains(" corrupted=0 failed=0"), out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void nothingLiveIsRemovedWhateverWasDeletedByHand() throws Exception {
        List<String> gone = handDeletionThenSweepAndReclaim(false);
        assertEquals(0, gone.size(), "live owners' files were removed, e.g. " + gone.stream().limit(5).toList());
    }

    /** Negative control: with the owner check off (a test-only seam), the same scenario removes live files. */
    @Test
    void withoutTheOwnerCheckTheSameScenarioRemovesLiveFiles() throws Exception {
        assertFalse(handDeletionThenSweepAndReclaim(true).isEmpty(), "the owner check is what keeps live files");
    }

    /**
     * Two live deployments stream; every mailbox and stats file of theirs is deleted by hand; their
     * processes are frozen (SIGSTOP: slow, not dead, and no file of theirs changes meanwhile); a third
     * deployment starts (its start sweeps) and an operator runs {@code reclaim --yes}. Returns the live
     * owners' files that are gone; with the owner check on, also checks every tensor in flight arrived intact.
     */
    private List<String> handDeletionThenSweepAndReclaim(boolean ignoreOwners) throws Exception {
        Nodes nodes = nodes();
        List<String> seam = ignoreOwners ? List.of("-Dmstar.test.reclaimIgnoresOwners=true") : List.of();
        List<ChildJvm> consumers = new ArrayList<>();
        List<ChildJvm> producers = new ArrayList<>();
        for (String deployment : List.of("a", "b")) {
            consumers.add(nodes.consumer(deployment, "consumer-" + deployment, 2));
            producers.add(nodes.producer(deployment, "producer-" + deployment, "consumer-" + deployment, 1_000_000,
                deployment.hashCode(), 1, SMALL_SEGMENTS));
        }
        for (ChildJvm consumer : consumers) {
            stamp(consumer, "FIRST"); // streaming, and ACKing: each side has found the other's mailbox
        }
        Thread.sleep(300);
        List<ChildJvm> live = new ArrayList<>(consumers);
        live.addAll(producers);
        signal("STOP", live);
        awaitStopped(live);
        List<String> kept = new ArrayList<>();
        for (String name : ShmTestDir.list(shm.path())) {
            if (name.contains("_mailbox_") || name.contains("_stats_") || name.endsWith(".lock")) {
                Files.delete(shm.path().resolve(name));
            } else if (Reclaimer.isHeld(shm.path(), name)) {
                kept.add(name); // owned; a file frozen between its creation and its owner's lock is not yet
            }
        }
        ChildJvm third = nodes.consumer(seam, "c", "consumer-c", 0);
        ChildJvm reclaim = ChildJvm.start(true, seam, Map.of(), MstarShm.class, "reclaim", "--dir",
            shm.path().toString(), "--yes");
        Nodes.expectExit(reclaim, 0);
        List<String> gone = kept.stream().filter(name -> !Files.exists(shm.path().resolve(name))).toList();
        signal("CONT", live);

        if (ignoreOwners) {
            for (ChildJvm child : List.of(third, producers.get(0), producers.get(1), consumers.get(0), consumers.get(1))) {
                Nodes.kill(child);
            }
            Reclaimer.sweep(shm.path());
            return gone;
        }
        nodes.stop(third, "consumer-c", 0);
        for (String deployment : List.of("a", "b")) {
            String producerOut = nodes.stop(producers.removeFirst(), "producer-" + deployment, 0);
            assertTrue(producerOut.contains("inFlight=0 liveSlots=0"), producerOut);
            String consumerOut = nodes.stop(consumers.removeFirst(), "consumer-" + deployment, 0);
            assertTrue(consumerOut.contains(" corrupted=0 failed=0"), consumerOut);
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "owners remove their own files at the end");
        return gone;
    }

    @Test
    void aConsumerRestartedUnderItsEntityTakesItsPlaceWhileItsProducerStreams() throws Exception {
        Nodes nodes = nodes();
        ChildJvm first = nodes.consumer("restart", "consumer", 1);
        ChildJvm producer = nodes.producer("restart", "producer", "consumer", 1_000_000, 3, 1, SMALL_SEGMENTS,
            "NODE_REJOIN_WAIT_S=60");
        Thread.sleep(500);
        Nodes.kill(first);
        Thread.sleep(300); // the producer meets the dead consumer meanwhile

        ChildJvm second = nodes.consumer("restart", "consumer", 1); // its dead predecessor's mailbox is in the way
        long ready = stamp(second, "READY consumer");
        long firstTensor = stamp(second, "FIRST");
        System.out.println("the restarted consumer received its first tensor " + (firstTensor - ready)
            + " ms after its start");
        assertTrue(firstTensor - ready <= 1000, "the new consumer received " + (firstTensor - ready)
            + " ms after its start");

        String producerOut = nodes.stop(producer, "producer", 0);
        assertTrue(producerOut.contains("inFlight=0 liveSlots=0"), producerOut);
        assertTrue(Integer.parseInt(value(producerOut, "peerUnavailable")) >= 1, "the producer was told:\n" + producerOut);
        assertEquals(1, count(producerOut, "consumer died before ACKing"), "one warning for one incident:\n" + producerOut);
        String consumerOut = nodes.stop(second, "consumer", 0);
        assertTrue(consumerOut.contains(" corrupted=0 failed=0"), consumerOut);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void aProducerRestartedUnderItsEntityGetsItsAcks() throws Exception {
        Nodes nodes = nodes();
        ChildJvm consumer = nodes.consumer("restart-producer", "consumer", 1, "NODE_TOLERATE_FAILED_FROM=producer");
        ChildJvm first = nodes.producer("restart-producer", "producer", "consumer", 1_000_000, 4, 1, SMALL_SEGMENTS);
        awaitFile("_arena_producer_");
        Thread.sleep(300);
        Nodes.kill(first);

        ChildJvm second = nodes.producer("restart-producer", "producer", "consumer", 2_000, 5, 1, SMALL_SEGMENTS);
        String producerOut = Nodes.expectExit(second, 0); // every tensor it sent was ACKed to its new incarnation
        assertTrue(producerOut.contains("sent=2000 inFlight=0 liveSlots=0"), producerOut);
        String consumerOut = nodes.stop(consumer, "consumer", 0);
        assertTrue(consumerOut.contains(" corrupted=0 failed=0"), consumerOut);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    // SIGSTOP is delivered asynchronously: wait until every thread of every child is stopped.
    private static void awaitStopped(List<ChildJvm> children) throws Exception {
        long deadline = System.nanoTime() + 10_000_000_000L;
        for (ChildJvm child : children) {
            Path tasks = Path.of("/proc/" + child.process().pid() + "/task");
            while (true) {
                List<String> states = new ArrayList<>();
                try (var threads = Files.list(tasks)) {
                    for (Path task : threads.toList()) {
                        String stat = Files.readString(task.resolve("stat"));
                        states.add(stat.substring(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
                    }
                } catch (IOException e) {
                    states.add("?"); // a thread ended meanwhile: look again
                }
                if (states.stream().allMatch(st -> st.equals("T") || st.equals("t"))) {
                    break;
                }
                assertTrue(System.nanoTime() < deadline, "not stopped: " + states);
                Thread.sleep(5);
            }
        }
    }

    private static void signal(String signal, List<ChildJvm> children) throws Exception {
        List<String> command = new ArrayList<>(List.of("kill", "-" + signal));
        children.forEach(c -> command.add(Long.toString(c.process().pid())));
        assertEquals(0, new ProcessBuilder(command).inheritIO().start().waitFor(), command.toString());
    }

    /**
     * A consumer in a PID namespace of its own (a container of the pod): nobody here can see its pid, yet
     * its producer frees what it sent once it dies, and the sweep takes its mailbox, as for any other.
     */
    @Test
    void anOwnerInAnotherPidNamespaceIsTreatedAlike() throws Exception {
        List<String> unshare = List.of("unshare", "--pid", "--fork", "--kill-child");
        Process probe = new ProcessBuilder(List.of("unshare", "--pid", "--fork", "true")).redirectErrorStream(true).start();
        String refusal = new String(probe.getInputStream().readAllBytes()).trim();
        Assumptions.assumeTrue(probe.waitFor() == 0, "SKIPPED: cannot make a PID namespace here (needs root): " + refusal);

        Nodes nodes = nodes();
        ChildJvm consumer = nodes.started(ChildJvm.startUnder(unshare, true, List.of(), Map.of(), Node.class, "consumer",
            shm.path().toString(), "pidns", "consumer", "-1", "1"), "pidns", "consumer");
        ChildJvm producer = nodes.producer("pidns", "producer", "consumer", 1_000_000, 6, 1, SMALL_SEGMENTS);
        String mailbox = files("_mailbox_consumer").getFirst();
        Thread.sleep(500);
        assertTrue(Reclaimer.isHeld(shm.path(), mailbox), "its lock is seen across the PID namespaces");
        Nodes.kill(consumer); // unshare dies, and --kill-child takes the namespace's JVM with it
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (Reclaimer.isHeld(shm.path(), mailbox)) {
            assertTrue(System.nanoTime() < deadline, "the consumer's lock outlived it");
            Thread.sleep(10);
        }
        String producerOut = Nodes.expectExit(producer, 0);
        assertTrue(producerOut.contains("inFlight=0 liveSlots=0") && producerOut.contains("STOPPED consumer consumer"),
            producerOut);
        Reclaimer.sweep(shm.path());
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    // The epoch milliseconds after a line prefix, waiting for the line.
    private static long stamp(ChildJvm child, String prefix) throws Exception {
        Pattern line = Pattern.compile("(?m)^" + Pattern.quote(prefix) + " (\\d+)$");
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            Matcher m = line.matcher(child.output());
            if (m.find()) {
                return Long.parseLong(m.group(1));
            }
            assertTrue(System.nanoTime() < deadline && child.process().isAlive(), "no " + prefix + ":\n" + child.output());
            Thread.sleep(10);
        }
    }

    private static String value(String out, String key) {
        Matcher m = Pattern.compile(key + "=(\\S+)").matcher(out);
        assertTrue(m.find(), key + " missing:\n" + out);
        return m.group(1);
    }

    private static int count(String out, String text) {
        return out.split(Pattern.quote(text), -1).length - 1;
    }

}
