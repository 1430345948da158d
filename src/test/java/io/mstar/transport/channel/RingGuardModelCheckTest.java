package io.mstar.transport.channel;

import io.mstar.transport.naming.Namespace;
import org.jetbrains.lincheck.Lincheck;
import org.jetbrains.lincheck.LincheckSettings;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A mailbox closed while a handler runs (a SIGTERM hook, a supervisor), under Lincheck's model checker: the
 * handler's thread, admitted late ({@link RingGuard#allowLateWrites}), writes its tensor's ACK into the ring after
 * the close began, and the close, as {@link ShmMailbox}'s does, waits for the handler, ends the late writes, waits
 * for every thread inside, then unmaps. Whatever the schedule: the ACK is written, and nothing touches the ring
 * once unmapped. The negative control runs the same schedules with no late writer, as the mailbox once closed, and
 * expects the checker to find the ACK refused.
 */
@Tag("modelcheck")
class RingGuardModelCheckTest {
    private static final int SCHEDULES = 2_000;
    private static final LincheckSettings SETTINGS = new LincheckSettings(true, 10, 1_000, 20);
    // No peer is ever mapped here: one set of them, made outside the checked code (hashing names is not its concern).
    private static final PeerMailboxes NO_PEERS = new PeerMailboxes(Path.of("/nonexistent"), Namespace.of(null, "model"),
        "reader");

    /** What the handler's thread did, and whether the ring was unmapped. */
    static final class Ring {
        final List<String> events = new ArrayList<>();
        volatile boolean unmapped;
        volatile Thread handling; // the mailbox's handler-runs mark

        synchronized void event(String what) {
            events.add(what);
        }

        synchronized List<String> events() {
            return new ArrayList<>(events);
        }
    }

    private static void closeDuringAHandlerScenario(boolean lateWrites) {
        Lincheck.runConcurrentTestInternal$lincheck(SCHEDULES, SETTINGS, () -> {
            RingGuard guard = new RingGuard(NO_PEERS, "reader");
            Ring ring = new Ring();
            Thread handler = new Thread(() -> {
                if (guard.tryEnter()) { // the ACK, once the handler returned
                    try {
                        ring.event(ring.unmapped ? "written after unmap" : "ACK written");
                    } finally {
                        guard.exit();
                    }
                } else {
                    ring.event("ACK refused");
                }
                ring.handling = null; // handlerRuns(false)
                guard.allowLateWrites(null);
            });
            ring.handling = handler; // handlerRuns(true): the handler runs when the close begins
            if (lateWrites) {
                guard.allowLateWrites(handler);
            }
            Thread closer = new Thread(() -> guard.close(() -> {
                while (ring.handling != null) { // awaitDispatch
                    Thread.yield();
                }
                guard.endLateWrites();
                guard.awaitNoneInside(() -> { });
                ring.unmapped = true;
            }));
            handler.start();
            closer.start();
            try {
                handler.join();
                closer.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertEquals(List.of("ACK written"), ring.events(), "the handler's ACK, written while the ring was mapped");
        });
    }

    @Test
    void aHandlerRunningWhenTheMailboxClosesHasItsAckWrittenAndNothingTouchesTheUnmappedRing() {
        closeDuringAHandlerScenario(true);
    }

    @Test
    void negativeControlTheModelCheckerFindsTheAckRefusedWithoutLateWrites() {
        AssertionError report = assertThrows(AssertionError.class, () -> closeDuringAHandlerScenario(false));
        String text = String.valueOf(report.getMessage());
        System.out.println("the model checker found: " + text.lines().limit(4).toList());
        assertTrue(text.contains("ACK refused"), text);
    }
}
