package io.mstar.transport.endpoint;

import io.mstar.transport.TensorChannel;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Gathered ACKs: one message for up to eight, in order, each producer's to its own, and none held for long. */
class GatheredAcksTest {
    /** The messages sent, as "producer: msb msb ..." (each ACK named by its most significant half). */
    private final List<String> sent = Collections.synchronizedList(new ArrayList<>());
    /** Runs inside each write of gathered ACKs, before it is recorded: a test holds a writer there. */
    private volatile Runnable duringWrite = () -> { };
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
            duringWrite.run();
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

    /**
     * The ACK thread is preempted in the middle of sending the gathered ACKs: the handling thread, about to send a
     * later tensor's ACK on its own, first waits for that write, so the later ACK never passes the gathered ones.
     * (Before, the count went to 0 before the write, and the handling thread saw nothing to wait for.)
     */
    @Test
    void aLaterAckWaitsForTheAckThreadsWriteOfTheGatheredOnes() throws InterruptedException {
        CountDownLatch inWrite = new CountDownLatch(1);
        CountDownLatch resume = new CountDownLatch(1);
        duringWrite = () -> {
            inWrite.countDown();
            try {
                resume.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        add("p", 1);
        Thread ackThread = new Thread(() -> acks.sendIfOlderThan(-1), "ack-thread");
        ackThread.start();
        assertTrue(inWrite.await(10, TimeUnit.SECONDS));
        duringWrite = () -> { };
        Thread handling = new Thread(() -> {
            acks.send(); // what was gathered before
            sent.add("p: 2 (sent on its own)");
        }, "handling");
        handling.start();
        handling.join(300); // it waits for the ACK thread's write, however long that takes
        resume.countDown();
        ackThread.join(10_000);
        handling.join(10_000);
        assertEquals(List.of("p: 1", "p: 2 (sent on its own)"), sent);
    }
}
