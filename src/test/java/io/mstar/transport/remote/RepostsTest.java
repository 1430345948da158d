package io.mstar.transport.remote;

import org.junit.jupiter.api.Test;

import java.util.UUID;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * The producer's map from a repost to its first send lasts as long as a receiver's duplicate window: a repost that
 * waited behind more than 65,536 others (the map's old bound) still names its first send when it is written.
 */
class RepostsTest {
    @Test
    void aRepostBehind100000OthersStillNamesItsFirstSendAndARepostOfARepostNamesTheSameOne() {
        Reposts reposts = new Reposts(60_000_000_000L);
        reposts.add(0, 1, 0, 1_000_001); // the repost waiting in a queue, first sent as 1_000_001
        reposts.add(0, 2, 0, 1); // a repost of that repost
        for (int i = 0; i < 100_000; i++) {
            reposts.add(1, i, 2, i);
        }
        assertEquals(new UUID(0, 1_000_001), reposts.firstOf(new UUID(0, 1)));
        assertEquals(new UUID(0, 1_000_001), reposts.firstOf(new UUID(0, 2)));
    }

    @Test
    void whatNoReceiverRemembersIsForgottenByAgeAndByTheWindowsBound() throws Exception {
        Reposts byAge = new Reposts(1_000_000); // 1 ms
        byAge.add(0, 1, 0, 9);
        Thread.sleep(5);
        byAge.add(0, 2, 0, 8);
        assertNull(byAge.firstOf(new UUID(0, 1)));
        assertEquals(1, byAge.size());
        Reposts byCount = new Reposts(Long.MAX_VALUE, 4);
        for (int i = 0; i < 10; i++) {
            byCount.add(0, i, 1, i);
        }
        assertEquals(4, byCount.size());
        assertNull(byCount.firstOf(new UUID(0, 5)));
        assertEquals(new UUID(1, 9), byCount.firstOf(new UUID(0, 9)));
    }
}
