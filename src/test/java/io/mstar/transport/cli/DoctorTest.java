package io.mstar.transport.cli;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.crossprocess.Node;
import io.mstar.transport.jmx.TransportMXBean;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class DoctorTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private record Run(int code, String out) {
    }

    private static Run run(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = MstarShm.run(args, new PrintStream(out, true), new PrintStream(err, true));
        return new Run(code, out + err.toString());
    }

    private ChildJvm consumer(String endpoint, String entity) throws Exception {
        ChildJvm child = ChildJvm.start(Node.class, "consumer", shm.path().toString(), endpoint, entity, "-1", "0");
        awaitMailbox(child, endpoint, entity);
        return child;
    }

    private void awaitMailbox(ChildJvm child, String endpoint, String entity) throws Exception {
        Path mailbox = shm.path().resolve(ShmNames.mailbox(Namespace.of(null, endpoint), entity));
        while (!Files.exists(mailbox)) {
            assertTrue(child.process().isAlive(), child.output());
            Thread.sleep(10);
        }
    }

    /** A dead owner inside a live deployment: doctor names it and exits 1; reclaim removes its files only. */
    @Test
    void aDeadOwnerInALiveDeploymentIsReportedAndReclaimRemovesOnlyItsFiles() throws Exception {
        String dir = shm.path().toString();
        ChildJvm live = consumer("doctor", "holder");
        ChildJvm worker = ChildJvm.start(Node.class, "producer", dir, "doctor", "worker", "holder", "1000000", "7", "1",
            "MSTAR_SHM_ARENA_SEGMENT_MB=4");
        awaitMailbox(worker, "doctor", "worker");
        while (ShmTestDir.list(shm.path()).stream().noneMatch(f -> f.contains("_arena_worker_"))) {
            Thread.sleep(10); // its first segment
        }
        worker.process().destroyForcibly().waitFor();
        worker.deleteLog();
        String ns = Namespace.of(null, "doctor").id();

        Run doctor = run("doctor", "--dir", dir);
        assertEquals(1, doctor.code, doctor.out);
        assertTrue(doctor.out.contains("namespace " + ns + ": live"), doctor.out);
        assertTrue(doctor.out.matches("(?s).*owner entity=worker owner=[0-9a-f]{8}: DEAD.*"), doctor.out);
        assertTrue(doctor.out.contains("owner entity=holder owner=mailbox: live (lock held by pid [" + live.process().pid()
            + "])"), doctor.out);
        assertTrue(doctor.out.contains("mappedBy=[" + live.process().pid() + "]"), "the live mailbox's mapper:\n" + doctor.out);
        assertTrue(doctor.out.contains("mstar-shm reclaim --dir " + dir + " --yes"), "says how to fix it:\n" + doctor.out);

        Run json = run("doctor", "--dir", dir, "--json");
        assertEquals(1, json.code);
        assertTrue(json.out.startsWith("{\"dir\":") && json.out.contains("\"healthy\":false")
            && json.out.contains("\"entity\":\"worker\"") && json.out.contains("\"live\":false")
            && json.out.contains("\"fix\":\"mstar-shm reclaim"), json.out);

        Run dryRun = run("reclaim", "--dir", dir);
        assertEquals(0, dryRun.code);
        assertTrue(dryRun.out.contains("would remove") && dryRun.out.contains("_worker_") && !dryRun.out.contains("holder"),
            dryRun.out);
        assertTrue(ShmTestDir.list(shm.path()).stream().anyMatch(f -> f.contains("_worker")), "a dry run removes nothing");

        Run reclaim = run("reclaim", "--dir", dir, "--yes");
        assertTrue(reclaim.out.contains("removed") && reclaim.out.contains("_worker") && !reclaim.out.contains("holder"),
            reclaim.out);
        List<String> left = ShmTestDir.list(shm.path());
        assertTrue(left.contains(ShmNames.mailbox(Namespace.of(null, "doctor"), "holder"))
            && left.stream().allMatch(f -> f.contains("_holder")), "only the live holder's files: " + left);
        assertEquals(0, run("doctor", "--dir", dir).code);

        Files.createFile(Node.stopFile(dir, "holder"));
        assertEquals(0, live.await(60), live.output());
        live.deleteLog();
        Files.delete(Node.stopFile(dir, "holder"));
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void statsReadsTheSnapshotALiveArenaPublishes() throws Exception {
        TransportConfig config = TransportConfig.from(Map.of(
            TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.STATS_INTERVAL_S, "0.05")::get);
        Namespace ns = Namespace.of(null, "stats-test");
        Owner owner = Owner.create(shm.path(), ns, "producer");
        try (var transport = new ArenaTransport(config,
            new SegmentedArena(owner, 1 << 20, 1, Duration.ofSeconds(30)), true)) {
            var d = transport.send("r", List.of(Tensor.of(DType.U8,
                MemorySegment.ofArray(new byte[100]), 100))).getFirst();
            Path file = shm.path().resolve(owner.statsName());
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!(Files.exists(file) && Files.readString(file).contains("tensorsSent=1"))) {
                assertTrue(System.nanoTime() < deadline, "no stats file");
                Thread.sleep(20);
            }
            Run human = run("stats", "--dir", shm.path().toString());
            assertEquals(0, human.code);
            assertTrue(human.out.contains("entity producer own arena owner " + owner.nonce() + " (live)")
                && human.out.contains("tensorsSent=1"), human.out);
            Run json = run("stats", "--dir", shm.path().toString(), "--json");
            assertTrue(json.out.contains("\"entity\":\"producer\",\"owner\":\"" + owner.nonce() + "\",\"live\":true")
                && json.out.contains("\"tensorsSent\":1"),
                json.out);
            assertTrue(!human.out.contains("segmentMap") && !json.out.contains("segmentMap"), "the map only on request");
            // One 100-byte slot (a 256-byte granule) at the start of the 1 MiB segment: 1/64 of it is in use.
            Run map = run("stats", "--dir", shm.path().toString(), "--map");
            assertTrue(map.out.contains("segment  0 |+" + ".".repeat(63) + "|   0% used, 1 mixed"), map.out);
            Run mapJson = run("stats", "--dir", shm.path().toString(), "--map", "--json");
            assertTrue(mapJson.out.contains("\"segmentMap\":[\"+" + ".".repeat(63) + "\"]"), mapJson.out);
            transport.ack(List.of(d.uuid()));
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "closing removes the stats file");
    }

    /**
     * A producer and a consumer endpoint, opened as a user opens them (no stats switch): both show in {@code
     * stats --json} from another "process", with what they did, and {@code endpoint.stats()} says the same.
     */
    @Test
    void statsListsTheEndpointsOfARunningPairWithNoCode() throws Exception {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "1")::get);
        try (TensorEndpoint producer = TensorEndpoint.open(Deployment.of(config, "pair", "producer"));
             TensorEndpoint consumer = TensorEndpoint.open(Deployment.of(config, "pair", "consumer"))) {
            assertTrue(producer.awaitPeer("consumer", Duration.ofSeconds(10)));
            for (int i = 0; i < 3; i++) {
                producer.send("consumer", "r", Tensor.of(DType.U8, MemorySegment.ofArray(new byte[100]), 100));
            }
            int read = 0;
            while (read < 3) {
                read += consumer.receive(tensor -> { }, Duration.ofSeconds(10));
            }
            long deadline = System.nanoTime() + 10_000_000_000L;
            Run json;
            do {
                assertTrue(System.nanoTime() < deadline, "no stats for the pair");
                Thread.sleep(50);
                json = run("stats", "--dir", shm.path().toString(), "--json");
            } while (!(json.out.contains("\"tensorsSent\":3") && json.out.contains("\"tensorsReceived\":3")));
            assertTrue(json.out.contains("\"entity\":\"producer\"") && json.out.contains("\"entity\":\"consumer\""),
                json.out);
            assertEquals(3, producer.stats().transport().tensorsSent());
            assertEquals(3, consumer.stats().transport().tensorsReceived());
            assertEquals("consumer", consumer.stats().entity());
            assertEquals(new TensorEndpoint.MailboxStats(0, 0, 0, 0, 0), consumer.stats().mailbox());
            assertTrue(producer.stats().remote().isEmpty());
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "closing removes the stats files");
    }

    /**
     * Across nodes, each node's {@code stats --json} shows the cross-node counters of its endpoint (sent and landed
     * on the producer's node, received on the consumer's, one connection on each) and names each arena: the
     * entity's own, and the landing arena tensors from other nodes arrive in.
     */
    @Test
    void statsShowsTheCrossNodePathOnBothNodesAndNamesEachArena() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             TensorEndpoint consumer = TensorEndpoint.open(Deployment.of(nodes.config(false), "m", "decode"));
             TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true), "m", "prefill"))) {
            Delivery delivery = producer.send("decode", "r", Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096));
            assertEquals(1, consumer.receive(tensor -> { }, Duration.ofSeconds(30)));
            assertEquals(Delivery.Status.DELIVERED, delivery.await(Duration.ofSeconds(30)));
            String sending = awaitStats(nodes.dirA, "\"remote\":{\"tensorsSent\":1,\"bytesSent\":4096,\"landed\":1,");
            assertTrue(sending.contains("\"entity\":\"prefill\",") && sending.contains("\"arena\":\"own\""), sending);
            assertTrue(sending.contains("\"connections\":1,"), sending);
            String receiving = awaitStats(nodes.dirB, "\"tensorsReceived\":1,\"bytesReceived\":4096,");
            assertTrue(receiving.contains("\"arena\":\"own\"") && receiving.contains("\"arena\":\"landing\""),
                receiving);
            assertTrue(receiving.contains("\"connections\":1,"), receiving);
            String text = run("stats", "--dir", nodes.dirB.toString()).out;
            assertTrue(text.contains("entity decode landing arena") && text.contains("entity decode own arena"), text);
            assertTrue(text.contains("remote.tensorsReceived=1"), text);
            assertEquals(1L, remoteOverJmx("prefill", "landed")); // the endpoints' MXBeans show the same
            assertEquals(1L, remoteOverJmx("decode", "tensorsReceived"));
        }
    }

    // A counter of the cross-node path from the bean of an entity's transport that is on it (its landing arena's is not).
    private static long remoteOverJmx(String entity, String counter) throws Exception {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        ObjectName pattern = new ObjectName(TransportMXBean.DOMAIN + ":type=TensorTransport,entity=" + entity + ",*");
        long deadline = System.nanoTime() + 30_000_000_000L; // beans register on a thread of their own
        while (true) {
            for (ObjectName name : server.queryNames(pattern, null)) {
                if (server.getAttribute(name, "Remote") instanceof CompositeData remote) {
                    return (Long) remote.get(counter);
                }
            }
            assertTrue(System.nanoTime() < deadline, "no MXBean of entity=" + entity + " shows the cross-node path");
            Thread.sleep(50);
        }
    }

    private static String awaitStats(Path dir, String expected) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        Run json;
        do {
            assertTrue(System.nanoTime() < deadline, "stats --json never showed " + expected);
            Thread.sleep(50);
            json = run("stats", "--dir", dir.toString(), "--json");
        } while (!json.out.contains(expected));
        return json.out;
    }

    @Test
    void usageErrorsExitWithTwo() {
        assertEquals(2, run("doctor", "--bogus").code);
        assertEquals(2, run("reclaim", "--dir", shm.path().resolve("missing").toString()).code);
        assertEquals(2, run("no-such-command").code);
        assertEquals(2, run().code);
    }

    /** A crashed process's embedded Aeron driver directory: doctor counts the bytes in it, reclaim removes all of it. */
    @Test
    void aDeadAeronDirectoryIsCountedWholeAndReclaimedWhole() throws Exception {
        String ns = Namespace.of(null, "doctor").id();
        Path driver = Files.createDirectories(shm.path().resolve("mstar_" + ns + "_aeron_decode_0badf00d").resolve("driver"));
        Files.write(driver.resolve("cnc.dat"), new byte[4096]);
        Files.write(Files.createDirectories(driver.resolve("images")).resolve("1-2.logbuffer"), new byte[65536]);

        Run doctor = run("doctor", "--dir", shm.path().toString());
        assertEquals(1, doctor.code, doctor.out);
        assertTrue(doctor.out.matches("(?s).*aeron\\s+69632 .*mstar_" + ns + "_aeron_decode_0badf00d\\s+DEAD.*"), doctor.out);
        Run reclaim = run("reclaim", "--dir", shm.path().toString(), "--yes");
        assertEquals(0, reclaim.code, reclaim.out);
        assertTrue(reclaim.out.contains("69632 bytes"), reclaim.out);
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }
}
