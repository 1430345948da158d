package io.mstar.transport.endpoint;

import io.mstar.transport.TensorChannel;
import org.jetbrains.lincheck.Lincheck;
import org.jetbrains.lincheck.LincheckSettings;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The gathered ACKs ({@link GatheredAcks}) under Lincheck's model checker: the handling thread gathers and sends
 * (or, for a tensor not gathered, sends the gathered ones and then its own ACK), while the ACK thread sends what
 * waits too long, and the checker switches threads at every shared read, write and lock, a preemption in the middle
 * of the ACK thread's write included. The invariant: every ACK written exactly once, and none before an ACK the
 * handling thread gathered ahead of it. The negative control runs the same scenario on the order this class once
 * had (the count zeroed before the write) and expects the checker to find the schedule that reorders.
 */
@Tag("modelcheck")
class GatheredAcksModelCheckTest {
    private static final int SCHEDULES = 2_000;
    private static final LincheckSettings SETTINGS = new LincheckSettings(true, 10, 1_000, 20);

    /** The ACKs written to the producer, in the order written, each named by its uuid's most significant half. */
    static final class Written implements TensorChannel.Records {
        private final List<Long> acks = new ArrayList<>();

        @Override
        public void sendDescriptorRecord(String toEntity, MemorySegment record, long offset, int length) {
            throw new AssertionError("no records");
        }

        @Override
        public synchronized void sendAck(String toEntity, long uuidMsb, long uuidLsb) {
            acks.add(uuidMsb);
        }

        @Override
        public void sendRefusal(String toEntity, long uuidMsb, long uuidLsb) {
            throw new AssertionError("no refusals");
        }

        @Override
        public void sendAcks(String toEntity, long[] uuidHalves, int count) {
            for (int i = 0; i < count; i++) {
                long msb = uuidHalves[2 * i];
                synchronized (this) { // one at a time: a preemption between them is a write in progress
                    acks.add(msb);
                }
            }
        }

        @Override
        public int pollRecords(TensorChannel.RecordListener listener, int limit) {
            return 0;
        }

        synchronized List<Long> acks() {
            return new ArrayList<>(acks);
        }
    }

    // Tensors 1 and 2 handled quickly (gathered), then tensor 3 slowly (its ACK goes on its own, after the gathered
    // ones), while the ACK thread sends what was gathered: 1, 2, 3 each once, in that order.
    private static void preemptedMidSendScenario(boolean countZeroedBeforeWrite) {
        Lincheck.runConcurrentTestInternal$lincheck(SCHEDULES, SETTINGS, () -> {
            Written written = new Written();
            GatheredAcks gathered = new GatheredAcks(written, countZeroedBeforeWrite);
            gathered.add("p", 1, -1, 0);
            gathered.add("p", 2, -2, 0);
            Thread ackThread = new Thread(() -> gathered.sendIfOlderThan(-1));
            Thread handling = new Thread(() -> {
                gathered.send(); // what was gathered before, as MailboxReading.dispatch does
                written.sendAck("p", 3, -3);
            });
            ackThread.start();
            handling.start();
            try {
                ackThread.join();
                handling.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertEquals(List.of(1L, 2L, 3L), written.acks(), "each ACK written once, in the order handled");
        });
    }

    @Test
    void aLaterAckNeverPassesTheGatheredOnesWhateverTheSchedule() {
        preemptedMidSendScenario(false);
    }

    @Test
    void negativeControlTheModelCheckerFindsALaterAckPassingAWriteInProgress() {
        AssertionError report = assertThrows(AssertionError.class, () -> preemptedMidSendScenario(true));
        String text = String.valueOf(report.getMessage());
        System.out.println("the model checker found: " + text.lines().limit(4).toList());
        assertTrue(text.contains("in the order handled"), text);
    }
}
