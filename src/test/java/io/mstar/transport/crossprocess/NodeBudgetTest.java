package io.mstar.transport.crossprocess;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
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
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The node budget ({@code MSTAR_SHM_NODE_MAX_MB}) across real processes: 8 workers that each try to fill their
 * own arena (4 segments of 4 MiB each, 128 MiB together) commit at most the budget's 24 MiB of segments
 * together, counted in the directory, and none fails (what does not fit spills); a SIGKILLed worker's share comes
 * back once the sweep removed its files, and a new worker takes it.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class NodeBudgetTest {
    private static final long BUDGET_BYTES = 24L << 20;
    private static final int WORKERS = 8;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private ChildJvm worker(String entity, String budgetMb) throws IOException {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "4", TransportConfig.NODE_MAX_MB, budgetMb,
            TransportConfig.RECLAIM_INTERVAL_S, "0");
        return ChildJvm.start(false, env, BudgetWorker.class, entity, "16");
    }

    @Test
    void eightWorkersFillingTheirArenasCommitAtMostTheBudgetAndADeadWorkersShareComesBack() throws Exception {
        List<ChildJvm> workers = new ArrayList<>();
        try {
            for (int i = 0; i < WORKERS; i++) {
                workers.add(worker("w" + i, Long.toString(BUDGET_BYTES >> 20)));
            }
            for (ChildJvm w : workers) {
                w.awaitOutput("FILLED sent=16", 120); // every send succeeded: a slot or a spill file
            }
            long committed = segmentBytes();
            System.out.println("node budget: " + WORKERS + " workers committed " + committed + " bytes of segments, budget "
                + BUDGET_BYTES);
            assertTrue(committed <= BUDGET_BYTES, "segments together: " + committed + " bytes, budget " + BUDGET_BYTES);
            assertTrue(committed >= BUDGET_BYTES - (4L << 20), "the budget was used, not refused early: " + committed);

            int victim = 0;
            while (segmentBytesOf("w" + victim) == 0) { // which workers got segments is the scheduler's choice
                victim++;
            }
            String deadEntity = "w" + victim;
            ChildJvm dead = workers.remove(victim);
            long deadBytes = segmentBytesOf(deadEntity);
            dead.process().destroyForcibly().waitFor(); // SIGKILL: nothing of its own is cleaned up
            assertEquals(deadBytes, segmentBytesOf(deadEntity), "its segments stay until the sweep");
            Reclaimer.sweep(shm.path()); // what every worker's sweep does on its interval

            ChildJvm late = worker("w8", Long.toString(BUDGET_BYTES >> 20));
            workers.add(late);
            late.awaitOutput("FILLED sent=16", 120);
            assertTrue(segmentBytesOf("w8") >= Math.min(deadBytes, 4L << 20), "the dead worker's share came back: w8 has "
                + segmentBytesOf("w8") + " bytes of segments, " + deadEntity + " had " + deadBytes);
            assertTrue(segmentBytes() <= BUDGET_BYTES, "still within the budget: " + segmentBytes());
            System.out.println("node budget: " + deadEntity + " held " + deadBytes + " bytes when killed; after the sweep w8 took "
                + segmentBytesOf("w8") + ", all together " + segmentBytes());
        } finally {
            for (ChildJvm w : workers) {
                w.process().getOutputStream().close(); // each closes its transport and exits
            }
            for (ChildJvm w : workers) {
                w.await(60);
                w.deleteLog();
            }
        }
        try (Stream<Path> left = Files.list(shm.path())) {
            assertEquals(List.of(), left.map(p -> p.getFileName().toString()).toList(), "the last one out removed the"
                + " budget file too");
        }
    }

    @Test
    void withoutABudgetTheSameWorkersCommitMore() throws Exception {
        List<ChildJvm> workers = new ArrayList<>();
        try {
            for (int i = 0; i < WORKERS; i++) {
                workers.add(worker("w" + i, "0"));
            }
            for (ChildJvm w : workers) {
                w.awaitOutput("FILLED sent=16", 120);
            }
            assertTrue(segmentBytes() > BUDGET_BYTES, "the negative control: " + segmentBytes());
            System.out.println("no node budget: " + WORKERS + " workers committed " + segmentBytes() + " bytes");
        } finally {
            for (ChildJvm w : workers) {
                w.process().getOutputStream().close();
            }
            for (ChildJvm w : workers) {
                w.await(60);
                w.deleteLog();
            }
        }
    }

    private long segmentBytes() throws IOException {
        return segmentBytesOf(null);
    }

    // The bytes of the segment files in the directory, of one entity or of all.
    private long segmentBytesOf(String entity) throws IOException {
        long total = 0;
        try (Stream<Path> files = Files.list(shm.path())) {
            for (Path f : files.toList()) {
                ShmNames.Parsed parsed = ShmNames.parse(f.getFileName().toString());
                if (parsed != null && parsed.kind() == ShmNames.Kind.SEGMENT && (entity == null || entity.equals(parsed.entity()))) {
                    total += Files.size(f);
                }
            }
        }
        return total;
    }
}
