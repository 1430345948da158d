package io.mstar.transport.chaos;

import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The API-usage campaign ({@link UsageCampaign}): a short budget in every build from a fixed seed, a long one on
 * demand: {@code mvn test -Dtest=UsageCampaignTest#campaign -Dusage.minutes=30 -Dusage.seed=7}. The negative
 * control brings back an outcome queue whose take is not atomic (two threads telling at once may tell one outcome
 * twice and skip the next: a misnamed outcome) and expects the campaign to find it ({@code -Dgroups=slow}); so do
 * one for each class the campaign grew with (a listener that posts, a stage whose handler waits on its own window,
 * close with a listener told when polled, a handler that throws an Error), each bringing back the code it replaced.
 */
@Timeout(value = 120, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class UsageCampaignTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private UsageCampaign.Report run(long seed, long millis, List<String> jvmOptions) throws Exception {
        UsageCampaign.Report report = new UsageCampaign(seed, millis, shm.path(), jvmOptions).run();
        System.out.println(report + (jvmOptions.isEmpty() ? "" : "\n  with " + jvmOptions));
        report.configs().forEach(c -> System.out.println("  " + c));
        return report;
    }

    @Test
    void campaign() throws Exception {
        long seed = Long.getLong("usage.seed", 1);
        long millis = Long.getLong("usage.minutes", 0) > 0 ? Long.getLong("usage.minutes") * 60_000
            : Long.getLong("usage.seconds", 40) * 1000;
        UsageCampaign.Report report = run(seed, millis, List.of());
        assertTrue(report.violations().isEmpty(), report::toString);
        assertTrue(report.posted() > 1000 && report.told() == report.posted(), "the campaign posted enough and every"
            + " post was told once: " + report);
    }

    @Test
    @Tag("slow")
    void withATakeThatIsNotAtomicTheCampaignFindsMisnamedOutcomes() throws Exception {
        UsageCampaign.Report report = run(Long.getLong("usage.seed", 1), Long.getLong("usage.seconds", 60) * 1000,
            List.of("-Dmstar.test.outcomeTakeNotAtomic=true"));
        assertFalse(report.violations().isEmpty(), report::toString);
    }

    /** Telling re-entered from a listener that posts (the telling this replaced): found deep or overflowing. */
    @Test
    @Tag("slow")
    void withReentrantTellingTheCampaignFindsAListenerThatPostsGrowingTheStack() throws Exception {
        assertFinds("-Dmstar.test.concurrentTellers=true", "listenerPosts");
    }

    /** Handlers that hold the mailbox (as they once did): a stage whose handler waits on its own window sticks. */
    @Test
    @Tag("slow")
    void withHandlersHoldingTheMailboxTheCampaignFindsAStuckStage() throws Exception {
        assertFinds("-Dmstar.test.handlersHoldTheMailbox=true", "stage");
    }

    /** Close that leaves a listener told when polled untold (as it once did): posts never told. */
    @Test
    @Tag("slow")
    void withCloseLeavingAPolledListenerUntoldTheCampaignFindsPostsNeverTold() throws Exception {
        assertFinds("-Dmstar.test.closeLeavesPolledUntold=true", "closePolled");
    }

    /** A handler's Error that drops the rest of its poll and the ACKs it gathered (as it once did): posts untold. */
    @Test
    @Tag("slow")
    void withAnErrorDroppingItsPollTheCampaignFindsPostsNeverTold() throws Exception {
        assertFinds("-Dmstar.test.errorDropsItsPoll=true", "throws");
    }

    private void assertFinds(String seam, String forced) throws Exception {
        UsageCampaign.Report report = run(Long.getLong("usage.seed", 1), Long.getLong("usage.seconds", 30) * 1000,
            List.of(seam, "-Dusage.forced=" + forced));
        assertFalse(report.violations().isEmpty(), report::toString);
    }
}
