package io.mstar.transport.onnx;

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
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The mapping under an in-place ORT input stays while ORT reads it: a consumer transport closed during
 * the run, 20 times, and SIGTERM (whose shutdown hook closes it) during runs, 20 times, in child JVMs:
 * every run completes or throws, and no JVM dies.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class OrtCloseRaceTest {
    private static final int TIMES = 20;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void aTransportClosedDuringTheRunNeverCrashesTheJvm() throws Exception {
        long seed = System.nanoTime();
        ChildJvm child = ChildJvm.start(false, List.of("-Xmx256m"), java.util.Map.of(), OrtCloseRace.class,
            shm.path().toString(), "close", Integer.toString(TIMES), Long.toString(seed));
        int exit = child.await(300);
        assertNull(child.crashReport(), "the JVM crashed, seed=" + seed);
        assertEquals(0, exit, "seed=" + seed + ": " + child.output());
        String result = child.result("completed");
        assertTrue(result != null, child.output());
        System.out.println("ORT close race: " + child.output().lines().filter(l -> l.startsWith("RESULT")).toList()
            + " seed=" + seed);
        child.deleteLog();
    }

    @Test
    void sigtermDuringTheRunNeverCrashesTheJvm() throws Exception {
        SplittableRandom random = new SplittableRandom(System.nanoTime());
        for (int i = 0; i < TIMES; i++) {
            ChildJvm child = ChildJvm.start(false, List.of("-Xmx256m"), java.util.Map.of(), OrtCloseRace.class,
                shm.path().toString(), "sigterm");
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (!child.output().contains("READY")) {
                assertTrue(child.process().isAlive() && System.nanoTime() < deadline, "never ready: " + child.output());
                Thread.sleep(10);
            }
            Thread.sleep(random.nextInt(150));
            child.process().destroy(); // SIGTERM
            int exit = child.await(60);
            assertNull(child.crashReport(), "run " + i + ": the JVM crashed");
            assertEquals(143, exit, "run " + i + ": " + child.output());
            assertEquals(List.of(), ShmTestDir.list(shm.path()), "run " + i);
            child.deleteLog();
        }
    }
}
