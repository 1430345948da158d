package io.mstar.transport.remote;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static io.mstar.transport.remote.DuplicateWindow.Match.ABSENT;
import static io.mstar.transport.remote.DuplicateWindow.Match.DIFFERENT;
import static io.mstar.transport.remote.DuplicateWindow.Match.SAME;
import static org.junit.jupiter.api.Assertions.assertEquals;

class DuplicateWindowTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void aFirstUuidLandsOnceWithinTheWindowAndAgainAfterIt() {
        DuplicateWindow window = new DuplicateWindow(60 * SECOND, 60 * SECOND);
        assertEquals(ABSENT, window.add(1, 2, 4096, 7, 0));
        assertEquals(SAME, window.add(1, 2, 4096, 7, 59 * SECOND), "a repeat within the window is a duplicate");
        assertEquals(SAME, window.match(1, 2, 4096, 7, 59 * SECOND));
        assertEquals(ABSENT, window.match(2, 1, 4096, 7, 59 * SECOND));
        assertEquals(ABSENT, window.match(1, 2, 4096, 7, 61 * SECOND), "forgotten after the window");
        assertEquals(ABSENT, window.add(1, 2, 4096, 7, 61 * SECOND));
        assertEquals(1, window.entries());
    }

    /**
     * A clean-clone CI run of the cross-node campaign: a tensor landed just before a 30 s partition, its
     * confirmation was lost, and its repost landed after the partition, past a 12 s window on the clock: handed over
     * twice. The window runs on the sender's time, in which a silence counts one timeout at most.
     */
    @Test
    void aPartitionLongerThanTheWindowDoesNotAgeWhatLandedBeforeIt() {
        DuplicateWindow window = new DuplicateWindow(12 * SECOND, 2 * SECOND);
        assertEquals(ABSENT, window.add(1, 2, 4096, 7, 0));
        assertEquals(ABSENT, window.add(3, 4, 4096, 7, 2 * SECOND));
        assertEquals(SAME, window.add(1, 2, 4096, 7, 43 * SECOND), "41 s of silence counted as 2: 4 s of 12");
        for (long s = 44; s <= 51; s++) { // the sender heard from again, a tensor a second: its time runs
            assertEquals(ABSENT, window.add(s, s, 4096, 7, s * SECOND));
        }
        assertEquals(SAME, window.match(1, 2, 4096, 7, 51 * SECOND), "12 s of the sender's time: still known");
        assertEquals(ABSENT, window.match(1, 2, 4096, 7, 52 * SECOND), "13 s of the sender's time: forgotten");
    }

    /**
     * A tensor that names a landed first send but has other bytes (another member sending under a uuid it saw) is
     * not that tensor: told apart, so its producer is never confirmed for bytes it did not deliver.
     */
    @Test
    void aRepeatWithOtherBytesOrAnotherLengthIsNotTheSameTensor() {
        DuplicateWindow window = new DuplicateWindow(60 * SECOND, 60 * SECOND);
        assertEquals(ABSENT, window.add(1, 2, 4096, 7, 0));
        assertEquals(DIFFERENT, window.match(1, 2, 4096, 8, SECOND), "another checksum");
        assertEquals(DIFFERENT, window.match(1, 2, 4097, 7, SECOND), "another length");
        assertEquals(DIFFERENT, window.add(1, 2, 4096, 8, SECOND));
        assertEquals(SAME, window.match(1, 2, 4096, 7, SECOND), "the first send's fingerprint stays");
    }

    @Test
    void theCapPushesOutTheOldestFirstAndCountsThemAndEachKeepsItsFingerprint() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        SplittableRandom random = new SplittableRandom(seed);
        int cap = 4096; // more than the first ring: it grows on the way
        DuplicateWindow window = new DuplicateWindow(Long.MAX_VALUE / 2, Long.MAX_VALUE / 2, cap);
        long[] msbs = new long[3 * cap];
        long[] lsbs = new long[3 * cap];
        for (int i = 0; i < msbs.length; i++) {
            msbs[i] = random.nextLong();
            lsbs[i] = random.nextLong();
            assertEquals(ABSENT, window.add(msbs[i], lsbs[i], i, i * 31, i), "seed=" + seed + " i=" + i);
        }
        assertEquals(cap, window.entries());
        assertEquals(2L * cap, window.pushedOutYoung());
        for (int i = 0; i < msbs.length; i++) {
            assertEquals(i >= 2 * cap ? SAME : ABSENT, window.match(msbs[i], lsbs[i], i, i * 31, msbs.length),
                "seed=" + seed + " i=" + i);
        }
    }
}
