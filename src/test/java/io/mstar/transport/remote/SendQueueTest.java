package io.mstar.transport.remote;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The queue a link's writer drains: a write that throws leaves the queue drainable by the next send's writer. */
class SendQueueTest {
    private static List<SendQueue.Queued> batch(String... keys) {
        List<SendQueue.Queued> out = new ArrayList<>();
        for (String k : keys) {
            out.add(new SendQueue.Queued(null, k, Long.MAX_VALUE, null));
        }
        return out;
    }

    @Test
    void aWriteThatThrowsLeavesItsTensorFirstAndTheNextSendDrainsEverything() throws Exception {
        SendQueue queue = new SendQueue();
        List<String> written = new ArrayList<>();
        boolean[] fail = {true};
        assertTrue(queue.add(batch("a", "b"), Long.MAX_VALUE));
        assertThrows(IllegalStateException.class, () -> queue.drainOn(Runnable::run, q -> {
            if (fail[0]) {
                fail[0] = false;
                throw new IllegalStateException("a writer's unexpected error");
            }
            return written.add(q.key());
        }));
        assertTrue(queue.add(batch("c"), Long.MAX_VALUE));
        queue.drainOn(Runnable::run, q -> written.add(q.key()));
        assertEquals(List.of("a", "b", "c"), written, "the peer's queue drains again, in order, nothing lost");
        assertTrue(queue.isEmpty());
    }
}
