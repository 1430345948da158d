package io.mstar.transport.remote;

import org.junit.jupiter.api.Test;

import java.util.UUID;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * The producer's map from a repost to its first send lasts at least as long as a receiver's duplicate window: a
 * repost that waited behind more than 65,536 others (the map's old bound), or past the window on the wall clock,
 * still names its first send when it is written.
 */
class RepostsTest {
    @Test
    void aRepostBehind100000OthersStillNamesItsFirstSendAndARepostOfARepostNamesTheSameOne() {
        Reposts reposts = new Reposts();
        reposts.add(0, 1, 0, 1_000_001); // the repost waiting in a queue, first sent as 1_000_001
        reposts.add(0, 2, 0, 1); // a repost of that repost
        for (int i = 0; i < 100_000; i++) {
            reposts.add(1, i, 2, i);
        }
        assertEquals(new UUID(0, 1_000_001), reposts.firstOf(new UUID(0, 1)));
        assertEquals(new UUID(0, 1_000_001), reposts.firstOf(new UUID(0, 2)));
    }

    /**
     * A producer that backs off past the receiver's window on the wall clock (a minute: 6 timeouts) before it reposts:
     * the receiver's window aged only while this sender was heard, so it still knows the first send, and the repost
     * must name it. (Forgotten here by the wall clock, it went under a uuid the receiver never saw: handed over twice.)
     */
    @Test
    void aRepostAfterALongSilenceStillNamesItsFirstSend() throws Exception {
        Reposts reposts = new Reposts();
        reposts.add(0, 1, 0, 9);
        Thread.sleep(5); // a silence: nothing here ages by the clock (it once did, by 6 timeouts of it)
        reposts.add(0, 2, 0, 8);
        assertEquals(new UUID(0, 9), reposts.firstOf(new UUID(0, 1)));
        assertEquals(2, reposts.size());
    }

    @Test
    void whatNoReceiverCanRememberIsForgottenByTheWindowsBound() {
        Reposts byCount = new Reposts(4);
        for (int i = 0; i < 10; i++) {
            byCount.add(0, i, 1, i);
        }
        assertEquals(4, byCount.size());
        assertNull(byCount.firstOf(new UUID(0, 5)));
        assertEquals(new UUID(1, 9), byCount.firstOf(new UUID(0, 9)));
    }
}
