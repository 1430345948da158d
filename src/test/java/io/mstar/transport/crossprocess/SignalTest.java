package io.mstar.transport.crossprocess;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * SIGTERM and SIGINT at any point of a process's life (waiting for a peer, opening, sending) leave
 * nothing behind: every file and directory it owned, its landing transport's on the cross-node path
 * included, is gone once it exited, with no sweep run.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SignalTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private Map<String, String> env(boolean remote) throws IOException {
        Map<String, String> env = new HashMap<>(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "2", TransportConfig.MAX_SEGMENTS, "2",
            TransportConfig.RECLAIM_INTERVAL_S, "0"));
        if (remote) {
            int[] ports = TwoNodes.freePorts();
            env.put(RemoteConfig.LISTEN, "127.0.0.1:" + ports[0]);
            env.put(RemoteConfig.ENTITIES, "me=127.0.0.1:" + ports[0] + ",far=127.0.0.1:" + ports[1]);
            env.put(RemoteConfig.SECRET, TwoNodes.SECRET);
        }
        return env;
    }

    // Starts the node, signals it once it printed READY (or after delayMs when not waiting for it), and
    // checks that it exited and left nothing.
    private void signalAndCheck(String mode, boolean remote, boolean waitForReady, long delayMs, String signal)
        throws Exception {
        ChildJvm child = ChildJvm.start(true, env(remote), SignalNode.class, mode);
        long deadline = System.nanoTime() + 60_000_000_000L;
        if (waitForReady) {
            while (!child.output().contains("READY")) {
                assertTrue(child.process().isAlive() && System.nanoTime() < deadline, "never ready: " + child.output());
                Thread.sleep(20);
            }
        }
        Thread.sleep(delayMs);
        new ProcessBuilder("kill", "-" + signal, Long.toString(child.process().pid())).start().waitFor();
        child.await(60);
        List<String> left = ShmTestDir.list(shm.path());
        assertEquals(List.of(), left, mode + " after SIG" + signal + " at " + delayMs + " ms"
            + (waitForReady ? " after READY" : " after start") + " left files; its output:\n" + child.output());
        child.deleteLog();
    }

    @Test
    void whileWaitingForAPeerOnAnotherNode() throws Exception {
        signalAndCheck("await", true, true, 200, "TERM");
        signalAndCheck("await", true, true, 200, "INT");
    }

    @Test
    void whileOpening() throws Exception {
        SplittableRandom random = new SplittableRandom(System.nanoTime());
        for (int i = 0; i < 6; i++) {
            signalAndCheck("open", i % 2 == 0, false, 300 + random.nextInt(1200), i % 3 == 0 ? "INT" : "TERM");
        }
    }

    @Test
    void whileSending() throws Exception {
        SplittableRandom random = new SplittableRandom(System.nanoTime());
        for (int i = 0; i < 4; i++) {
            signalAndCheck("send", false, true, random.nextInt(500), i % 2 == 0 ? "TERM" : "INT");
        }
    }
}
