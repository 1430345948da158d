package io.mstar.transport.chaos;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A three-stage pipeline in four processes, as a user builds it from the guide: a producer posts 1,000 tensors
 * of 4 KiB to 8 MiB, one every 15 ms, to {@code middle}, which checks each and posts a tensor derived from it
 * to {@code sink} (keeping every 7th past its handler); every 10th tensor the producer also sends to
 * {@code sink} and {@code sink2} at once. The sink is SIGKILLed after 300 tensors and restarted under the same
 * entity 3 s later. Every byte any stage sees must be right, none twice per incarnation, every outcome told
 * within the bound, and nothing left behind ({@link FaultCampaign#check}). Two runs in every build;
 * {@code -Dpipeline.runs=20} on demand.
 */
@Timeout(value = 60, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class RestartPipelineTest {
    @Test
    void aSinkKilledAndRestartedMidStreamNeverSeesWrongBytes() throws Exception {
        int runs = Integer.getInteger("pipeline.runs", 2);
        long sent = 0;
        long checked = 0;
        for (int run = 0; run < runs; run++) {
            Path dir = Files.createTempDirectory(ShmTestDir.SHM, "mstar-pipeline-");
            try {
                Map<String, List<ChildJvm>> incarnations = run(dir, run);
                List<String> violations = FaultCampaign.check(incarnations, Set.of("producer"), Set.of(), List.of(dir));
                assertTrue(violations.isEmpty(), "run " + run + ": " + String.join("\n", violations));
                sent += FaultCampaign.count(incarnations, "SENT ");
                checked += FaultCampaign.count(incarnations, "GOT ");
            } finally {
                ShmTestDir.deleteTree(dir);
            }
        }
        System.out.println("restart pipeline: runs=" + runs + " tensorsSent=" + sent + " tensorsChecked=" + checked
            + " violations=0");
    }

    private static Map<String, List<ChildJvm>> run(Path dir, int run) throws Exception {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, dir.toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "32", TransportConfig.MAX_SEGMENTS, "4");
        Map<String, List<ChildJvm>> incarnations = new LinkedHashMap<>();
        List<ChildJvm> all = new ArrayList<>();
        try {
            ChildJvm sink = start(incarnations, all, env, "consumer", "sink", run * 10L + 1);
            start(incarnations, all, env, "consumer", "sink2", run * 10L + 2);
            ChildJvm middle = start(incarnations, all, env, "middle", "middle", run * 10L + 3, "sink");
            ChildJvm producer = start(incarnations, all, env, "pipeline", "producer", run * 10L + 4, "1000", "10");
            producer.awaitOutput("SENT t-300 ", 120);
            sink.process().destroyForcibly().waitFor();
            Thread.sleep(3000);
            start(incarnations, all, env, "consumer", "sink", run * 10L + 5);
            producer.await(180);
            Thread.sleep(ChaosWorker.OUTCOME_BOUND_MS / 2); // the middle's last outcomes, or its LATE lines
            for (ChildJvm child : all) {
                child.process().destroy();
            }
            for (ChildJvm child : all) {
                child.await(60);
            }
            return incarnations;
        } finally {
            for (ChildJvm child : all) {
                child.process().destroyForcibly().waitFor();
            }
        }
    }

    private static ChildJvm start(Map<String, List<ChildJvm>> incarnations, List<ChildJvm> all, Map<String, String> env,
                                  String role, String entity, long seed, String... more) throws Exception {
        List<String> args = new ArrayList<>(List.of(role, entity, Long.toString(seed)));
        args.addAll(List.of(more));
        ChildJvm child = ChildJvm.start(true, List.of("-Xmx1g"), env, ChaosWorker.class, args.toArray(String[]::new));
        incarnations.computeIfAbsent(entity, e -> new ArrayList<>()).add(child);
        all.add(child);
        if (!role.equals("pipeline")) {
            child.awaitOutput("READY " + entity, 120);
        }
        return child;
    }
}
