package io.mstar.transport.endpoint;

import io.mstar.transport.TensorChannel;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Gathered ACKs: one message for up to eight, in order, each producer's to its own, and none held for long. */
class GatheredAcksTest {
    /** The messages sent, as "producer: msb msb ..." (each ACK named by its most significant half). */
    private final List<String> sent = new ArrayList<>();
    private final GatheredAcks acks = new GatheredAcks(new TensorChannel.Records() {
        @Override
        public void sendDescriptorRecord(String toEntity, MemorySegment record, long offset, int length) {
            throw new AssertionError("no records");
        }

        @Override
        public void sendAck(String toEntity, long uuidMsb, long uuidLsb) {
            throw new AssertionError("gathered ACKs go as one message");
        }

        @Override
        public void sendRefusal(String toEntity, long uuidMsb, long uuidLsb) {
            throw new AssertionError("no refusals");
        }

        @Override
        public void sendAcks(String toEntity, long[] uuidHalves, int count) {
            StringBuilder message = new StringBuilder(toEntity + ":");
            for (int i = 0; i < count; i++) {
                assertEquals(-uuidHalves[2 * i], uuidHalves[2 * i + 1], "the halves of one uuid together");
                message.append(' ').append(uuidHalves[2 * i]);
            }
            sent.add(message.toString());
        }

        @Override
        public int pollRecords(TensorChannel.RecordListener listener, int limit) {
            return 0;
        }
    });

    private void add(String producer, long msb) {
        acks.add(producer, msb, -msb, System.nanoTime());
    }

    @Test
    void eightAcksGoAsOneMessageAndTheNinthStartsTheNext() {
        for (long i = 1; i <= 9; i++) {
            add("p", i);
        }
        assertEquals(List.of("p: 1 2 3 4 5 6 7 8"), sent);
        assertTrue(acks.any());
        acks.send();
        assertEquals(List.of("p: 1 2 3 4 5 6 7 8", "p: 9"), sent);
        assertFalse(acks.any());
        acks.send();
        assertEquals(2, sent.size(), "nothing gathered, nothing sent");
    }

    @Test
    void anotherProducersAckSendsTheGatheredOnesFirst() {
        add("p", 1);
        add("p", 2);
        add("q", 3);
        acks.send();
        assertEquals(List.of("p: 1 2", "q: 3"), sent);
    }

    @Test
    void theAckThreadSendsOnlyWhatWasGatheredLongerAgoThanItsBound() throws InterruptedException {
        add("p", 1);
        acks.sendIfOlderThan(60_000_000_000L);
        assertEquals(List.of(), sent, "a minute has not passed");
        Thread.sleep(2);
        acks.sendIfOlderThan(1_000_000L);
        assertEquals(List.of("p: 1"), sent);
    }
}
