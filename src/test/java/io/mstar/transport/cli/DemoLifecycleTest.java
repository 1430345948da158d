package io.mstar.transport.cli;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The demo and its two child processes: nothing outlives its owner, however the demo stops. */
@Timeout(value = 300, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class DemoLifecycleTest {
    private static final int KILL_CYCLES = 3;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    // A demo whose children are streaming through the arena.
    private ChildJvm runningDemo() throws Exception {
        ChildJvm demo = ChildJvm.start(true, List.of(), Map.of(TransportConfig.SHM_DIR, shm.path().toString()),
            MstarShm.class, "demo", "--seconds-per-size", "60");
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (demo.process().children().count() < 2 || !segmentExists()) {
            assertTrue(System.nanoTime() < deadline && demo.process().isAlive(), "the demo did not start:\n" + demo.output());
            Thread.sleep(20);
        }
        return demo;
    }

    // The demo's children rename and delete files while these look: ShmTestDir.tree skips the vanished.
    private String tree() {
        return ShmTestDir.tree(shm.path()).toString();
    }

    private boolean segmentExists() {
        return ShmTestDir.tree(shm.path()).stream().anyMatch(name -> name.contains("_arena_producer_"));
    }

    @Test
    void theChildrenOfADemoKilledOutrightExitByThemselvesAndTheSweepRemovesItsDirectory() throws Exception {
        for (int cycle = 0; cycle < KILL_CYCLES; cycle++) {
            ChildJvm demo = runningDemo();
            List<ProcessHandle> children = demo.process().children().toList();
            long killedAt = System.nanoTime();
            demo.process().destroyForcibly().waitFor();
            long deadline = killedAt + 30_000_000_000L;
            while (!children.stream().allMatch(DemoLifecycleTest::exited)) {
                assertTrue(System.nanoTime() < deadline, "the demo's children outlived it by 30 s");
                Thread.sleep(5);
            }
            long exitMs = (System.nanoTime() - killedAt) / 1_000_000;
            System.out.println("cycle " + cycle + ": the demo's children exited " + exitMs + " ms after its SIGKILL");
            assertTrue(exitMs <= 2000, "children exited " + exitMs + " ms after their parent died");
            demo.deleteLog();
            assertEquals(1, ShmTestDir.list(shm.path()).size(), "the dead demo's directory stays until a sweep");
            String before = tree();
            List<Reclaimer.Removed> removed = Reclaimer.sweep(shm.path());
            assertTrue(removed.stream().anyMatch(r -> r.name().startsWith("mstar-demo-")), removed + " of " + before);
            assertEquals(List.of(), ShmTestDir.list(shm.path()));
        }
    }

    // Exited: gone, or a zombie (every thread ended) that the orphans' new parent (pid 1 here) has not reaped yet.
    private static boolean exited(ProcessHandle process) {
        try {
            List<String> status = Files.readAllLines(Path.of("/proc/" + process.pid() + "/status"));
            return status.contains("Threads:\t1") && status.stream().anyMatch(l -> l.startsWith("State:\tZ"));
        } catch (IOException e) {
            return true;
        }
    }

    @Test
    void sigtermStopsTheChildrenWithAGraceAndSaysWhatItDid() throws Exception {
        ChildJvm demo = runningDemo();
        List<ProcessHandle> children = demo.process().children().toList();
        demo.process().destroy();
        int exit = demo.await(60);
        String out = demo.output();
        assertEquals(128 + 15, exit, out);
        assertTrue(out.contains("demo stopped early: sent TERM to"), out);
        assertTrue(children.stream().noneMatch(ProcessHandle::isAlive), "no child outlives the demo");
        demo.deleteLog();
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "the demo removes its directory on SIGTERM");
    }
}
