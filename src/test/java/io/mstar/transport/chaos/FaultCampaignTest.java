package io.mstar.transport.chaos;

import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The fault campaign ({@link FaultCampaign}): a short budget runs in every build from a fixed seed; a long
 * one runs on demand: {@code mvn test -Dtest=FaultCampaignTest#campaign -Dchaos.minutes=30 -Dchaos.seed=7}.
 * The negative controls turn one guard off each (a test-only seam) and expect the campaign to find it
 * ({@code -Dgroups=slow}).
 */
@Timeout(value = 120, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class FaultCampaignTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private FaultCampaign.Report run(long seed, long millis, List<String> seams) throws Exception {
        Path nodeB = Files.createTempDirectory(ShmTestDir.SHM, "mstar-chaos-nodeB-");
        try {
            FaultCampaign.Report report = new FaultCampaign(seed, millis, shm.path(), nodeB, seams).run();
            System.out.println(report + (seams.isEmpty() ? "" : "\n  with " + seams));
            return report;
        } finally {
            ShmTestDir.deleteTree(nodeB);
        }
    }

    @Test
    void campaign() throws Exception {
        long seed = Long.getLong("chaos.seed", 1);
        long millis = Long.getLong("chaos.minutes", 0) > 0 ? Long.getLong("chaos.minutes") * 60_000
            : Long.getLong("chaos.seconds", 60) * 1000;
        FaultCampaign.Report report = run(seed, millis, List.of());
        assertTrue(report.violations().isEmpty(), report::toString);
        assertTrue(report.handled() > 100 && report.faults().values().stream().mapToInt(i -> i).sum() > 10,
            "the campaign sent and broke enough to mean something: " + report);
    }

    /** Without incarnation keys (shares keyed by a bare entity name until delivered), and without the stamp check. */
    @Test
    @Tag("slow")
    void withoutIncarnationKeysTheCampaignFindsWrongBytes() throws Exception {
        assertFound("-Dmstar.test.bareShareKeys=true", "-Dmstar.test.noStampCheck=true");
    }

    /** Without the write hold: a stalled remote reader's queued writes send reused slots. */
    @Test
    @Tag("slow")
    void withoutTheWriteHoldTheCampaignFindsBytesChangedOnTheWire() throws Exception {
        assertFound("-Dmstar.test.noWriteHold=true");
    }

    /** Without the stamp check, a slot freed on the first ACK of a fan-out is read as good by the slower consumer. */
    @Test
    @Tag("slow")
    void withoutTheStampCheckTheCampaignFindsWrongBytes() throws Exception {
        assertFound("-Dmstar.test.fanOutFirstAckFrees=true", "-Dmstar.test.noStampCheck=true");
    }

    private void assertFound(String... seams) throws Exception {
        FaultCampaign.Report report = run(Long.getLong("chaos.seed", 1), Long.getLong("chaos.seconds", 60) * 1000,
            List.of(seams));
        assertFalse(report.violations().isEmpty(), report::toString);
    }
}
