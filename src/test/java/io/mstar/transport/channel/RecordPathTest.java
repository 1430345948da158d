package io.mstar.transport.channel;

import com.sun.management.ThreadMXBean;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The record path: claim, publish the record, send it as is, poll it in place, read the tensor in place,
 * ACK by halves. Every tensor arrives intact and is freed, and the steady state allocates (almost) nothing.
 */
class RecordPathTest {
    private static final int BYTES = 4096;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    /** One round trip at a time, both sides in this thread. */
    private static final class RoundTrip implements TensorChannel.RecordListener, TensorRecords.Reader {
        final TensorTransport producer;
        final TensorTransport consumer;
        final TensorChannel producerBox;
        final TensorChannel consumerBox;
        final MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
        final MemorySegment source = MemorySegment.ofArray(new byte[BYTES]);
        final Tensor tensor = Tensor.of(DType.U8, source, BYTES);
        final boolean claiming;
        long sequence;
        long mismatches;
        long received;

        RoundTrip(boolean claiming, TensorTransport producer, TensorTransport consumer, TensorChannel producerBox,
                  TensorChannel consumerBox) {
            this.claiming = claiming;
            this.producer = producer;
            this.consumer = consumer;
            this.producerBox = producerBox;
            this.consumerBox = consumerBox;
        }

        void once() {
            sequence++;
            if (claiming) { // written in place
                try (TensorClaim claim = producer.claim("r", DType.U8, BYTES)) {
                    fill(claim.memory());
                    producerBox.records().sendDescriptorRecord("consumer", record, 0, claim.publish(record, 0));
                }
            } else { // written here, copied into a slot
                fill(source);
                producerBox.records().sendDescriptorRecord("consumer", record, 0, producer.records().sendInto("r", tensor, record, 0));
            }
            while (consumerBox.records().pollRecords(this, 16) == 0) {
                Thread.onSpinWait(); // a poll may read only the padding at the ring's end
            }
            while (producerBox.records().pollRecords(this, 16) == 0) {
                Thread.onSpinWait();
            }
        }

        private void fill(MemorySegment memory) {
            memory.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, sequence);
            memory.set(ValueLayout.JAVA_LONG_UNALIGNED, BYTES - 8, ~sequence);
        }

        @Override
        public void descriptor(String from, MemorySegment in, long offset, int length) { // the consumer's side
            consumer.records().receive(in, offset, length, this);
            consumerBox.records().sendAck(from, DescriptorCodec.uuidMsb(in, offset), DescriptorCodec.uuidLsb(in, offset));
        }

        @Override
        public void read(MemorySegment memory, long offset, long nbytes) {
            received++;
            if (nbytes != BYTES || memory.get(ValueLayout.JAVA_LONG_UNALIGNED, offset) != sequence
                || memory.get(ValueLayout.JAVA_LONG_UNALIGNED, offset + BYTES - 8) != ~sequence) {
                mismatches++;
            }
        }

        @Override
        public void ack(String from, long msb, long lsb) { // the producer's side
            producer.records().ack(msb, lsb);
        }
    }

    @Test
    void sendIntoThroughTheRecordPathAllocatesAtMost64BytesPerTensor() {
        assertTrue(roundTrips(false) <= 64);
    }

    @Test
    void aClaimThroughTheRecordPathAllocatesOnlyTheClaim() {
        assertTrue(roundTrips(true) <= 256); // the claim object, its slice and shape
    }

    @Test
    void aBadRecordIsRefusedWithItsFieldNamedAndNothingIsRead() {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1")::get);
        Deployment producerSide = Deployment.of(config, "records", "producer");
        Deployment elsewhere = Deployment.of(config, "another-deployment", "consumer");
        try (TensorTransport producer = TensorTransports.create(producerSide, false);
             TensorTransport stranger = TensorTransports.create(elsewhere, false);
             TensorChannel producerBox = TensorTransports.mailbox(producerSide)) {
            MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
            int length = producer.records().sendInto("r", Tensor.of(DType.U8, MemorySegment.ofArray(new byte[64]), 64), record, 0);
            long[] read = {0};
            DescriptorFormatException e = assertThrows(DescriptorFormatException.class,
                () -> stranger.records().receive(record, 0, length, (memory, offset, nbytes) -> read[0]++));
            assertEquals("fileName", e.field(), "a segment of another deployment's namespace");
            assertEquals(0, read[0]);
            assertThrows(DescriptorFormatException.class,
                () -> producerBox.records().sendDescriptorRecord("consumer", record, 0, length - 1));
            producer.records().ack(DescriptorCodec.uuidMsb(record, 0), DescriptorCodec.uuidLsb(record, 0));
        }
    }

    @Test
    void theAcksOfOnePollGoInOneMessage() {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString())::get);
        Deployment producerSide = Deployment.of(config, "records", "producer");
        try (TensorChannel producerBox = TensorTransports.mailbox(producerSide);
             TensorChannel consumerBox = TensorTransports.mailbox(producerSide.withEntity("consumer"))) {
            long[] halves = {1, 2, 3, 4, 5, 6, 99, 99};
            consumerBox.records().sendAcks("producer", halves, 3);
            List<Long> acked = new ArrayList<>();
            int messages = producerBox.records().pollRecords(new TensorChannel.RecordListener() {
                @Override
                public void descriptor(String from, MemorySegment record, long offset, int length) {
                }

                @Override
                public void ack(String from, long msb, long lsb) {
                    assertEquals("consumer", from);
                    acked.add(msb);
                    acked.add(lsb);
                }
            }, 16);
            assertEquals(1, messages, "three ACKs, one message");
            assertEquals(List.of(1L, 2L, 3L, 4L, 5L, 6L), acked);
            assertThrows(IllegalArgumentException.class, () -> consumerBox.records().sendAcks("producer", halves, 5));
        }
    }

    // Runs 100,000 round trips, checks every tensor, returns the bytes allocated per tensor in the steady state.
    private double roundTrips(boolean claiming) {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "16", TransportConfig.MAX_SEGMENTS, "1")::get);
        Deployment producerSide = Deployment.of(config, "records", "producer");
        Deployment consumerSide = producerSide.withEntity("consumer");
        try (TensorTransport producer = TensorTransports.create(producerSide, false);
             TensorTransport consumer = TensorTransports.create(consumerSide, false);
             TensorChannel producerBox = TensorTransports.mailbox(producerSide);
             TensorChannel consumerBox = TensorTransports.mailbox(consumerSide)) {
            RoundTrip trip = new RoundTrip(claiming, producer, consumer, producerBox, consumerBox);
            for (int i = 0; i < 50_000; i++) {
                trip.once(); // warm: compiled, rings wrapped, names cached
            }
            // The steady state: the least of ten windows, since the JIT may compile late on a busy machine.
            ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
            double perTensor = Double.MAX_VALUE;
            for (int window = 0; window < 10; window++) {
                long before = threads.getCurrentThreadAllocatedBytes();
                for (int i = 0; i < 5_000; i++) {
                    trip.once();
                }
                perTensor = Math.min(perTensor, (threads.getCurrentThreadAllocatedBytes() - before) / 5_000.0);
            }
            System.out.printf("record path, %s: %.1f bytes per tensor%n", claiming ? "claim" : "sendInto", perTensor);
            assertEquals(100_000, trip.received);
            assertEquals(0, trip.mismatches, "a tensor arrived torn or from a reused slot");
            assertEquals(0, producer.statsSummary().inFlight(), "every ACK freed its tensor");
            assertEquals(100_000, producer.statsSummary().sendToAck().count());
            return perTensor;
        }
    }
}
