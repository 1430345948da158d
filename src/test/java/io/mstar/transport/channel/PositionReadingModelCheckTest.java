package io.mstar.transport.channel;

import org.jetbrains.lincheck.Lincheck;
import org.jetbrains.lincheck.LincheckSettings;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.concurrent.ConcurrentHashMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Delivery by position ({@link PositionReading}) under Lincheck's model checker. A consumer refuses tensor 1 and
 * handles tensor 2: it writes the refusal into the producer's mailbox (a claim, then the publication) and then moves
 * its handled position past both; meanwhile the producer reads positions and its mailbox by the rule, twice, and
 * the checker switches threads at every shared read and write. The invariant: tensor 1 is decided REFUSED, never
 * DELIVERED, and tensor 2 DELIVERED, each once. The negative control runs the rule in the wrong order (the mailbox's
 * tail read before the positions) and expects the checker to find the schedule where the position wins.
 *
 * <p>The shared state lives in static fields, reset by each schedule: Lincheck takes an object made inside the
 * scenario for a local one and does not switch threads at its accesses (the negative control then finds nothing).
 */
@Tag("modelcheck")
class PositionReadingModelCheckTest {
    private static final int SCHEDULES = 2_000;
    private static final LincheckSettings SETTINGS = new LincheckSettings(true, 10, 1_000, 20);

    /** The producer's mailbox: messages claimed at the tail, published one by one, read from the head. */
    static final class ModelInbox implements PositionReading.Inbox, PositionReading.Passed {
        volatile long tail; // claimed by the one writer here
        volatile long published; // the refused uuid's msb, once its message is published (one message here)
        long head;
        final ConcurrentHashMap<Long, String> decided = new ConcurrentHashMap<>();

        @Override
        public long tail() {
            return tail;
        }

        @Override
        public long head() {
            return head;
        }

        @Override
        public int read() {
            int read = 0;
            while (head < tail && published != 0) {
                decided.putIfAbsent(published, "REFUSED");
                head++;
                read++;
            }
            return read;
        }

        @Override
        public void from(String consumer) {
        }

        @Override
        public void accept(long msb, long lsb) {
            decided.putIfAbsent(msb, "DELIVERED");
        }
    }

    static final ModelInbox INBOX = new ModelInbox();
    static final ModelPosition POSITION = new ModelPosition();

    /** The consumer's handled position. */
    static final class ModelPosition {
        volatile long value;
    }

    private static void refusalThenPositionScenario(boolean tailFirst) {
        Lincheck.runConcurrentTestInternal$lincheck(SCHEDULES, SETTINGS, () -> {
            ModelInbox inbox = INBOX;
            inbox.tail = 0;
            inbox.published = 0;
            inbox.head = 0;
            inbox.decided.clear();
            POSITION.value = 0;
            SentByPosition sent = new SentByPosition("consumer", () -> POSITION.value);
            sent.add(1, 1, -1);
            sent.add(2, 2, -2);
            PositionReading reading = new PositionReading(tailFirst);
            reading.list(sent);
            Thread consumer = new Thread(() -> {
                inbox.tail = inbox.tail + 1; // the refusal of tensor 1, claimed then published
                inbox.published = 1;
                POSITION.value = 2; // then the position past both
            });
            Throwable[] thrown = new Throwable[1];
            Thread producer = new Thread(() -> {
                try {
                    reading.read(inbox, inbox);
                    reading.read(inbox, inbox);
                } catch (Throwable e) {
                    thrown[0] = e;
                }
            });
            producer.start();
            consumer.start();
            try {
                consumer.join();
                producer.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertEquals(null, thrown[0], "the producer's reads threw");
            reading.read(inbox, inbox); // what a later read learns
            assertEquals("REFUSED", inbox.decided.get(1L), "the refused tensor is never told delivered");
            assertEquals("DELIVERED", inbox.decided.get(2L));
        });
    }

    @Test
    void aRefusalWrittenBeforeThePositionAlwaysWins() {
        refusalThenPositionScenario(false);
    }

    @Test
    void negativeControlTheModelCheckerFindsThePositionWinningWhenTheTailIsReadFirst() {
        AssertionError report = assertThrows(AssertionError.class, () -> refusalThenPositionScenario(true));
        String text = String.valueOf(report.getMessage());
        System.out.println("the model checker found: " + text.lines().limit(4).toList());
        assertTrue(text.contains("never told delivered"), text);
    }
}
