package io.mstar.transport.cli;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.testing.PythonChild;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A Python endpoint publishes its counters as the JVM's do: {@code mstar-shm stats} lists it, live, text and JSON. */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PythonEndpointStatsTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private String stats(String... options) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        String[] args = new String[options.length + 3];
        args[0] = "stats";
        args[1] = "--dir";
        args[2] = shm.path().toString();
        System.arraycopy(options, 0, args, 3, options.length);
        assertEquals(0, MstarShm.run(args, new PrintStream(out, true, StandardCharsets.UTF_8), System.err));
        return out.toString(StandardCharsets.UTF_8);
    }

    @Test
    void aPythonEndpointIsListedLiveWithItsCounters() throws Exception {
        PythonChild.assumeVenv();
        PythonChild consumer = PythonChild.start(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            "PYTHONUNBUFFERED", "1"), "mstar_transport.worker", "consume", "ipc:///tmp/mstar-stats-test", "py-reader",
            "1000000");
        try {
            consumer.awaitOutput("READY", 60);
            long deadline = System.nanoTime() + 30_000_000_000L;
            String text = stats();
            while (!text.contains("entity py-reader") && System.nanoTime() < deadline) {
                Thread.sleep(50);
                text = stats();
            }
            assertTrue(text.contains("entity py-reader python arena") && text.contains("(live)"), text);
            assertTrue(text.contains("\n  received=0\n"), "one counter a line: " + text);
            String json = stats("--json");
            assertTrue(json.contains("\"entity\":\"py-reader\"") && json.contains("\"live\":true")
                && json.contains("\"received\":0"), json);
        } finally {
            consumer.process().destroyForcibly().waitFor();
            consumer.deleteLog();
            Reclaimer.sweep(shm.path()); // the killed worker's mailbox and stats file, as any JVM's sweep takes them
        }
    }
}
