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
 * twice and skip the next: a misnamed outcome) and expects the campaign to find it ({@code -Dgroups=slow}).
 */
@Timeout(value = 120, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
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
}
