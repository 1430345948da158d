package io.mstar.transport.cli;

import io.mstar.transport.crossprocess.Node;
import io.mstar.transport.lifecycle.Namespace;
import io.mstar.transport.lifecycle.ShmNames;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
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

    private ChildJvm holder(String endpoint) throws Exception {
        ChildJvm child = ChildJvm.start(Node.class, "consumer", shm.path().toString(), endpoint, "holder", "-1", "0");
        Path mailbox = shm.path().resolve(ShmNames.mailbox(Namespace.of(null, endpoint), "holder"));
        while (!Files.exists(mailbox)) {
            assertTrue(child.process().isAlive(), child.output());
            Thread.sleep(10);
        }
        return child;
    }

    @Test
    void reportsLiveAndDeadDeploymentsAndReclaimRemovesOnlyTheDead() throws Exception {
        ChildJvm live = holder("doctor-live");
        ChildJvm dead = holder("doctor-dead");
        dead.process().destroyForcibly().waitFor();
        dead.deleteLog();
        String liveId = Namespace.of(null, "doctor-live").id();
        String deadId = Namespace.of(null, "doctor-dead").id();
        String dir = shm.path().toString();

        Run doctor = run("doctor", "--dir", dir);
        assertEquals(1, doctor.code, doctor.out);
        assertTrue(doctor.out.contains("namespace " + deadId + ": DEAD") && doctor.out.contains("ORPHAN"), doctor.out);
        assertTrue(doctor.out.contains("namespace " + liveId + ": live"), doctor.out);
        assertTrue(doctor.out.contains("mappedBy=[" + live.process().pid() + "]"), "the live mailbox's mapper:\n" + doctor.out);

        Run json = run("doctor", "--dir", dir, "--json");
        assertEquals(1, json.code);
        assertTrue(json.out.startsWith("{\"dir\":") && json.out.contains("\"healthy\":false")
            && json.out.contains("\"kind\":\"mailbox\""), json.out);

        Run dryRun = run("reclaim", "--dir", dir);
        assertEquals(0, dryRun.code);
        assertTrue(dryRun.out.contains("would remove") && !dryRun.out.contains(liveId), dryRun.out);
        assertTrue(ShmTestDir.list(shm.path()).stream().anyMatch(f -> f.contains(deadId)), "a dry run removes nothing");

        Run reclaim = run("reclaim", "--dir", dir, "--yes");
        assertTrue(reclaim.out.contains("removed") && !reclaim.out.contains(liveId), reclaim.out);
        List<String> left = ShmTestDir.list(shm.path());
        assertTrue(!left.isEmpty() && left.stream().allMatch(f -> f.contains(liveId)), left.toString());
        assertEquals(0, run("doctor", "--dir", dir).code);

        Files.createFile(Node.stopFile(dir, "holder"));
        assertEquals(0, live.await(60), live.output());
        live.deleteLog();
        Files.delete(Node.stopFile(dir, "holder"));
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void statsReadsTheSnapshotALiveArenaPublishes() throws Exception {
        io.mstar.transport.TransportConfig config = io.mstar.transport.TransportConfig.from(java.util.Map.of(
            io.mstar.transport.TransportConfig.SHM_DIR, shm.path().toString(),
            io.mstar.transport.TransportConfig.STATS_INTERVAL_S, "0.05")::get);
        Namespace ns = Namespace.of(null, "stats-test");
        try (var transport = new io.mstar.transport.arena.ArenaTransport(config,
            new io.mstar.transport.arena.SegmentedArena(shm.path(), ns, "producer", 1 << 20, 1), true)) {
            var d = transport.send("r", List.of(io.mstar.transport.Tensor.of(io.mstar.transport.DType.U8,
                java.lang.foreign.MemorySegment.ofArray(new byte[100]), 100))).getFirst();
            Path file = shm.path().resolve(io.mstar.transport.lifecycle.StatsFile.fileName(ns, "producer"));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!(Files.exists(file) && Files.readString(file).contains("tensorsSent=1"))) {
                assertTrue(System.nanoTime() < deadline, "no stats file");
                Thread.sleep(20);
            }
            Run human = run("stats", "--dir", shm.path().toString());
            assertEquals(0, human.code);
            assertTrue(human.out.contains("entity producer (live)") && human.out.contains("tensorsSent=1"), human.out);
            Run json = run("stats", "--dir", shm.path().toString(), "--json");
            assertTrue(json.out.contains("\"entity\":\"producer\",\"live\":true") && json.out.contains("\"tensorsSent\":1"),
                json.out);
            transport.ack(List.of(d.uuid()));
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "closing removes the stats file");
    }

    @Test
    void usageErrorsExitWithTwo() {
        assertEquals(2, run("doctor", "--bogus").code);
        assertEquals(2, run("reclaim", "--dir", shm.path().resolve("missing").toString()).code);
        assertEquals(2, run("no-such-command").code);
        assertEquals(2, run().code);
    }
}
