package io.mstar.transport.remote;

import org.junit.jupiter.api.Test;

import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DuplicateWindowTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void aFirstUuidLandsOnceWithinTheWindowAndAgainAfterIt() {
        DuplicateWindow window = new DuplicateWindow(60 * SECOND);
        assertTrue(window.add(1, 2, 0));
        assertFalse(window.add(1, 2, 59 * SECOND), "a repeat within the window is a duplicate");
        assertTrue(window.contains(1, 2, 59 * SECOND));
        assertFalse(window.contains(2, 1, 59 * SECOND));
        assertFalse(window.contains(1, 2, 61 * SECOND), "forgotten after the window");
        assertTrue(window.add(1, 2, 61 * SECOND));
        assertEquals(1, window.entries());
    }

    @Test
    void theCapPushesOutTheOldestFirstAndCountsThem() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        SplittableRandom random = new SplittableRandom(seed);
        int cap = 4096; // more than the first ring: it grows on the way
        DuplicateWindow window = new DuplicateWindow(Long.MAX_VALUE / 2, cap);
        long[] msbs = new long[3 * cap];
        long[] lsbs = new long[3 * cap];
        for (int i = 0; i < msbs.length; i++) {
            msbs[i] = random.nextLong();
            lsbs[i] = random.nextLong();
            assertTrue(window.add(msbs[i], lsbs[i], i), "seed=" + seed + " i=" + i);
        }
        assertEquals(cap, window.entries());
        assertEquals(2L * cap, window.pushedOutYoung());
        for (int i = 0; i < msbs.length; i++) {
            assertEquals(i >= 2 * cap, window.contains(msbs[i], lsbs[i], msbs.length), "seed=" + seed + " i=" + i);
        }
    }
}
