package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.acks.TensorFates;
import org.jetbrains.lincheck.Lincheck;
import org.jetbrains.lincheck.LincheckSettings;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The outcome path ({@link Outcomes}, {@link OutcomeQueue}) under Lincheck's model checker: each scenario runs
 * two or three threads through track, ACK, refusal, timeout, close, poll and a listener that posts, and the
 * checker explores their interleavings (switching threads at every shared read, write and lock). The invariant is
 * the endpoint's promise: every tracked tensor told exactly once, in the order decided, by one thread at a time,
 * never re-entrantly, or untracked with nothing told. The negative controls run the same scenarios on the telling
 * this replaced (every thread that decides tells what it takes, at once and re-entrantly) and expect the checker to
 * find the schedule that breaks it.
 */
@Tag("modelcheck")
class OutcomesModelCheckTest {
    private static final int SCHEDULES = 2_000;
    // Close scans the outcome table's 256 slots: more loop iterations than the checker's default bound (50), which
    // it would report as a hang. Lincheck 3.7 takes settings through this entry point only.
    private static final LincheckSettings SETTINGS = new LincheckSettings(true, 10, 1_000, 20);
    private static final TransportConfig CONFIG = TransportConfig.from(k -> null);

    /** What a listener heard, and whether it was ever entered twice at once. */
    static final class Heard implements DeliveryListener {
        final List<String> told = new ArrayList<>();
        final boolean polled;
        int inside;
        int mostInside;
        Outcomes outcomes; // for a listener that posts
        int postsLeft;

        Heard(boolean polled) {
            this.polled = polled;
        }

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            heard(requestId);
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            heard(requestId + ":" + failure);
        }

        private void heard(String what) {
            synchronized (this) {
                inside++;
                mostInside = Math.max(mostInside, inside);
                told.add(what);
            }
            if (outcomes != null && postsLeft > 0) { // a request loop: each outcome posts the next tensor
                long next = 100 + postsLeft--;
                outcomes.track(0, next, "p" + next, null, "c", null);
                outcomes.freed(0, next, TensorFates.Fate.ACKED, null); // its ACK came at once
                outcomes.tellDecided(MailboxReading.APPLICATION_TELLS); // as the post's reading tells
            }
            synchronized (this) {
                inside--;
            }
        }

        @Override
        public boolean toldWhenPolled() {
            return polled;
        }

        synchronized List<String> told() {
            return new ArrayList<>(told);
        }
    }

    private static void check(Runnable scenario) {
        Lincheck.runConcurrentTestInternal$lincheck(SCHEDULES, SETTINGS, scenario);
    }

    private static Thread start(Runnable r) {
        Thread t = new Thread(r);
        t.start();
        return t;
    }

    private static void join(Thread... threads) {
        try {
            for (Thread t : threads) {
                t.join();
            }
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    // An ACK reader decides two tensors and tells; a sender tells at once: the listener hears them in order.
    private static void twoTellersScenario(boolean oneTeller) {
        check(() -> {
            Heard heard = new Heard(false);
            Outcomes outcomes = new Outcomes(heard, CONFIG, new OutcomeQueue(oneTeller));
            outcomes.track(0, 1, "t1", null, "c", null);
            outcomes.track(0, 2, "t2", null, "c", null);
            Thread ackReader = start(() -> {
                outcomes.freed(0, 1, TensorFates.Fate.ACKED, null);
                outcomes.freed(0, 2, TensorFates.Fate.ACKED, null);
                outcomes.tellDecided(Integer.MAX_VALUE);
            });
            Thread sender = start(() -> outcomes.tellDecided(MailboxReading.APPLICATION_TELLS));
            join(ackReader, sender);
            outcomes.tellDecided(Integer.MAX_VALUE); // the ACK thread's next round
            assertEquals(List.of("t1", "t2"), heard.told(), "each told once, in the order decided");
            assertEquals(1, heard.mostInside, "the listener was entered twice at once");
        });
    }

    // A listener that posts the next tensor on each outcome, told from two threads: never re-entered.
    private static void listenerThatPostsScenario(boolean oneTeller) {
        check(() -> {
            Heard heard = new Heard(false);
            Outcomes outcomes = new Outcomes(heard, CONFIG, new OutcomeQueue(oneTeller));
            heard.outcomes = outcomes;
            heard.postsLeft = 2;
            outcomes.track(0, 1, "t1", null, "c", null);
            Thread ackReader = start(() -> {
                outcomes.freed(0, 1, TensorFates.Fate.ACKED, null);
                outcomes.tellDecided(Integer.MAX_VALUE);
            });
            Thread sender = start(() -> outcomes.tellDecided(MailboxReading.APPLICATION_TELLS));
            join(ackReader, sender);
            outcomes.tellDecided(Integer.MAX_VALUE);
            assertEquals(List.of("t1", "p102", "p101"), heard.told(), "each told once, in order");
            assertEquals(1, heard.mostInside, "the listener was entered again before it returned");
        });
    }

    @Test
    void twoThreadsThatDecideTellOneAtATimeInTheOrderDecided() {
        twoTellersScenario(true);
    }

    @Test
    void aListenerThatPostsIsNeverReentered() {
        listenerThatPostsScenario(true);
    }

    @Test
    void closeTellsAPolledListenerEveryTensorOnceWhileAnotherThreadPolls() {
        check(() -> {
            Heard heard = new Heard(true);
            Outcomes outcomes = new Outcomes(heard, CONFIG, new OutcomeQueue(true));
            outcomes.track(0, 1, "t1", null, "c", null);
            outcomes.track(0, 2, "t2", null, "c", null);
            Thread poller = start(() -> {
                outcomes.freed(0, 1, TensorFates.Fate.ACKED, null);
                outcomes.poll(1);
            });
            Thread closer = start(outcomes::closed);
            join(poller, closer);
            outcomes.poll(10); // after close: what is left, not an exception
            List<String> told = heard.told();
            assertEquals(2, told.size(), "each told once: " + told);
            assertTrue(told.contains("t2:CLOSED"), "the tensor in flight told CLOSED: " + told);
            assertTrue(told.contains("t1") || told.contains("t1:CLOSED"), "the ACKed one told once: " + told);
        });
    }

    @Test
    void aPostThatThrowsIsEitherUntrackedAndToldNothingOrDecidedAndDoesNotThrow() {
        check(() -> {
            Heard heard = new Heard(false);
            Outcomes outcomes = new Outcomes(heard, CONFIG, new OutcomeQueue(true));
            outcomes.track(0, 1, "t1", null, "c", null);
            boolean[] untracked = new boolean[1];
            Thread sender = start(() -> untracked[0] = outcomes.untrack(0, 1)); // its send threw
            Thread closer = start(outcomes::closed);
            join(sender, closer);
            outcomes.tellDecided(Integer.MAX_VALUE);
            assertEquals(untracked[0] ? List.of() : List.of("t1:CLOSED"), heard.told(),
                "an exception (untracked) and no outcome, or an outcome and no exception");
        });
    }

    @Test
    void anAckATimeoutAndADeathDecideOnce() {
        check(() -> {
            Heard heard = new Heard(false);
            Outcomes outcomes = new Outcomes(heard, CONFIG, new OutcomeQueue(true));
            outcomes.track(0, 1, "t1", null, "c", null);
            Thread ack = start(() -> {
                outcomes.freed(0, 1, TensorFates.Fate.ACKED, null);
                outcomes.tellDecided(Integer.MAX_VALUE);
            });
            Thread timeout = start(() -> {
                outcomes.refused(0, 1, "c", Delivery.Failure.REMOTE_TIMEOUT, "no confirmation");
                outcomes.freed(0, 1, TensorFates.Fate.EXPIRED, null);
                outcomes.tellDecided(MailboxReading.APPLICATION_TELLS);
            });
            Thread death = start(() -> {
                outcomes.freed(0, 1, TensorFates.Fate.CONSUMER_DIED, "c");
                outcomes.tellDecided(MailboxReading.APPLICATION_TELLS);
            });
            join(ack, timeout, death);
            outcomes.tellDecided(Integer.MAX_VALUE);
            assertEquals(1, heard.told().size(), "one outcome: " + heard.told());
        });
    }

    @Test
    void negativeControlTheModelCheckerFindsOutcomesToldOutOfOrderByConcurrentTellers() {
        assertFound(assertThrows(AssertionError.class, () -> twoTellersScenario(false)), "in the order decided",
            "entered twice at once");
    }

    @Test
    void negativeControlTheModelCheckerFindsAListenerReenteredByItsOwnPost() {
        assertFound(assertThrows(AssertionError.class, () -> listenerThatPostsScenario(false)), "entered again",
            "in order");
    }

    // The checker's report names a schedule that broke one of the scenario's own assertions.
    private static void assertFound(AssertionError report, String... expected) {
        String text = String.valueOf(report.getMessage());
        System.out.println("the model checker found: " + text.lines().limit(4).toList());
        assertTrue(java.util.Arrays.stream(expected).anyMatch(text::contains), text);
    }
}
