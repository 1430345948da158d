package io.mstar.transport;

import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.staging.StagedBatch;
import io.mstar.transport.staging.StagingRequest;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The behaviour every {@link TensorTransport} owes its users; one subclass per implementation. */
public abstract class TensorTransportContract {
    @RegisterExtension
    protected final ShmTestDir shm = new ShmTestDir();

    private final List<TensorTransport> opened = new ArrayList<>();

    /** A transport for {@code entity} in the test's directory, of the implementation under test. */
    protected abstract TensorTransport create(String entity);

    /** Unlinks the files the producer made, as a stopping process does. */
    protected abstract void unlinkOwnedFiles(TensorTransport producer);

    /** The deployment every transport of a contract test belongs to, for {@code entity}. */
    protected Deployment deployment(String entity) {
        return shm.deployment("contract", entity);
    }

    protected TensorTransport open(String entity) {
        TensorTransport t = create(entity);
        opened.add(t);
        return t;
    }

    @AfterEach
    void closeAll() {
        opened.forEach(TensorTransport::close);
    }

    public static Tensor randomTensor(SplittableRandom r, DType dtype, long... shape) {
        MemorySegment data = MemorySegment.ofArray(new byte[(int) Tensor.byteSize(dtype, shape)]);
        for (long i = 0; i < data.byteSize(); i++) {
            data.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        return new Tensor(dtype, shape, data);
    }

    public static long crc(MemorySegment data) {
        CRC32C crc = new CRC32C();
        crc.update(data.asByteBuffer());
        return crc.getValue();
    }

    @Test
    void sendReceiveAckRoundTripsEveryDtypeAndShape() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        SplittableRandom r = new SplittableRandom(5);
        List<Tensor> tensors = new ArrayList<>();
        for (DType dtype : DType.values()) {
            tensors.add(randomTensor(r, dtype, 3, 1 + r.nextInt(300)));
        }
        tensors.add(randomTensor(r, DType.F32));            // a scalar
        tensors.add(randomTensor(r, DType.I64, 0, 7));     // zero elements
        tensors.add(randomTensor(r, DType.U8, 1 << 20));  // 1 MiB
        List<TensorDescriptor> sent = producer.send("req-1", tensors);
        assertEquals(tensors.size(), sent.size());
        for (int i = 0; i < tensors.size(); i++) {
            TensorDescriptor d = sent.get(i);
            Tensor t = tensors.get(i);
            assertEquals(t.dtype(), d.dtype());
            assertArrayEquals(t.shape(), d.shape());
            assertEquals(t.nbytes(), d.nbytes());
            assertEquals("req-1", d.requestId());
            assertEquals("producer", d.producer());
            try (ReceivedTensor in = consumer.receive(d)) {
                assertEquals(t.nbytes(), in.data().byteSize());
                assertEquals(crc(t.data()), crc(in.data()), "tensor " + i + " intact");
                assertTrue(in.data().isReadOnly());
            }
        }
        assertEquals(tensors.size(), producer.statsSummary().inFlight());
        producer.ack(sent.stream().map(TensorDescriptor::uuid).toList());
        TransportStats stats = producer.statsSummary();
        assertEquals(0, stats.inFlight());
        assertEquals(tensors.size(), stats.acks());
        assertEquals(tensors.size(), consumer.statsSummary().tensorsReceived());
    }

    @Test
    void sendIntoWritesTheDescriptorAndAckByHalvesFreesIt() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        Tensor t = randomTensor(new SplittableRandom(12), DType.I32, 16, 16);
        MemorySegment buffer = MemorySegment.ofArray(new byte[1024]);
        int length = producer.records().sendInto("request-9", t, buffer, 100);
        TensorDescriptor d = DescriptorCodec.decode(buffer, 100, length, deployment("consumer"));
        assertEquals("request-9", d.requestId());
        assertArrayEquals(t.shape(), d.shape());
        try (ReceivedTensor in = consumer.receive(d)) {
            assertEquals(crc(t.data()), crc(in.data()));
        }
        assertEquals(1, producer.statsSummary().inFlight());
        producer.records().ack(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits());
        assertEquals(0, producer.statsSummary().inFlight());
        assertEquals(1, producer.statsSummary().acks());
    }

    @Test
    void aRecordIsReceivedInPlaceThroughAReaderAndItsAckByHalvesFreesIt() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        Tensor t = randomTensor(new SplittableRandom(21), DType.F32, 8, 32);
        MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
        int length = producer.records().sendInto("request-21", t, record, 0);
        long[] crcAndCalls = {0, 0};
        consumer.records().receive(record, 0, length, (memory, offset, nbytes) -> {
            crcAndCalls[0] = crc(memory.asSlice(offset, nbytes));
            crcAndCalls[1]++;
        });
        assertEquals(1, crcAndCalls[1]);
        assertEquals(crc(t.data()), crcAndCalls[0]);
        assertEquals(1, consumer.statsSummary().tensorsReceived());
        producer.records().ack(DescriptorCodec.uuidMsb(record, 0), DescriptorCodec.uuidLsb(record, 0));
        assertEquals(0, producer.statsSummary().inFlight());
        record.set(ValueLayout.JAVA_BYTE, 0, (byte) 0); // the magic
        assertThrows(DescriptorFormatException.class, () -> consumer.records().receive(record, 0, length, (m, o, n) -> { }));
    }

    @Test
    void theStatsTimeEachTensorFromSendToAckAndFromReceiveToRelease() throws InterruptedException {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        List<TensorDescriptor> sent = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            sent.addAll(producer.send("r", List.of(randomTensor(new SplittableRandom(i), DType.U8, 1000))));
        }
        for (TensorDescriptor d : sent) {
            try (ReceivedTensor in = consumer.receive(d)) {
                Thread.sleep(2); // held open at least 2 ms
            }
        }
        producer.ack(sent.stream().map(TensorDescriptor::uuid).toList());
        producer.ack(sent.stream().map(TensorDescriptor::uuid).toList()); // unknown now: not timed
        LatencyStats sendToAck = producer.statsSummary().sendToAck();
        LatencyStats held = consumer.statsSummary().receiveToRelease();
        assertEquals(5, sendToAck.count());
        assertTrue(sendToAck.p50Ns() >= 8_000_000, "the third tensor waited for two others held 2 ms: " + sendToAck);
        assertTrue(sendToAck.p50Ns() <= sendToAck.p99Ns() && sendToAck.p99Ns() <= sendToAck.maxNs(), sendToAck.toString());
        assertEquals(5, held.count());
        assertTrue(held.p50Ns() >= 2_000_000 && held.maxNs() >= held.p50Ns(), held.toString());
        assertEquals(0, consumer.statsSummary().sendToAck().count());
        assertTrue(producer.statsSummary().toLogLine().contains(" sendToAckP99Us="), producer.statsSummary().toLogLine());
    }

    @Test
    void aClaimWrittenInPlaceAndPublishedArrivesAndItsAckFreesIt() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        TensorDescriptor d;
        long expected;
        try (TensorClaim claim = producer.claim("request-3", DType.F32, 4, 8)) {
            MemorySegment room = claim.memory();
            assertEquals(4 * 8 * 4, room.byteSize());
            for (int i = 0; i < 32; i++) {
                room.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, i * 0.5f);
            }
            expected = crc(room);
            assertEquals(0, producer.statsSummary().inFlight(), "not in flight before it is published");
            d = claim.publish();
            assertEquals(claim.uuid(), d.uuid());
            assertThrows(IllegalStateException.class, claim::publish, "published once");
            assertThrows(IllegalStateException.class, claim::memory, "the producer's memory no more");
        }
        assertEquals("request-3", d.requestId());
        assertArrayEquals(new long[] {4, 8}, d.shape());
        assertEquals(1, producer.statsSummary().inFlight(), "closing a published claim changes nothing");
        try (ReceivedTensor in = consumer.receive(d)) {
            assertEquals(expected, crc(in.data()));
        }
        producer.ack(List.of(d.uuid()));
        TransportStats stats = producer.statsSummary();
        assertEquals(0, stats.inFlight());
        assertEquals(1, stats.tensorsSent());
        assertEquals(1, stats.acks());
    }

    @Test
    void aClaimPublishesItsRecordInPlaceAndAnAbortedOnePublishesNothing() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        MemorySegment buffer = MemorySegment.ofArray(new byte[1024]);
        TensorClaim claim = producer.claim("request-4", DType.U8, 100);
        claim.memory().fill((byte) 7);
        int length = claim.publish(buffer, 8);
        TensorDescriptor d = DescriptorCodec.decode(buffer, 8, length, deployment("consumer"));
        try (ReceivedTensor in = consumer.receive(d)) {
            assertEquals(crc(MemorySegment.ofArray(new byte[100]).fill((byte) 7)), crc(in.data()));
        }
        producer.records().ack(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits());

        TensorClaim aborted = producer.claim("request-5", DType.I64, 16);
        aborted.abort();
        assertThrows(IllegalStateException.class, aborted::abort);
        try (TensorClaim dropped = producer.claim("request-6", DType.U8, 0)) { // closed unpublished: aborted
            assertEquals(0, dropped.memory().byteSize());
        }
        TransportStats stats = producer.statsSummary();
        assertEquals(0, stats.inFlight());
        assertEquals(1, stats.tensorsSent(), "only the published claim was sent");
        assertEquals(0, stats.claimsAbandoned());
    }

    @Test
    void aClaimOpenWhenItsTransportClosesIsFreedAndCounted() {
        TensorTransport producer = create("producer");
        TensorClaim open = producer.claim("request-7", DType.U8, 4096);
        open.memory().fill((byte) 1);
        producer.close();
        assertEquals(1, producer.statsSummary().claimsAbandoned());
        assertThrows(IllegalStateException.class, open::publish, "its transport is closed: nothing to publish into");
        open.close(); // its room went with the transport: closing the claim afterwards is quiet
        assertThrows(IllegalStateException.class, () -> producer.claim("r", DType.U8, 1));
        assertThrows(IllegalArgumentException.class, () -> open("p2").claim("r", DType.U8, 1, 1, 1, 1, 1, 1, 1, 1, 1),
            "rank above 8");
    }

    @Test
    void copyToCallerMemoryAndBatchReceive() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        SplittableRandom r = new SplittableRandom(6);
        Tensor t = randomTensor(r, DType.BF16, 64, 64);
        TensorDescriptor d = producer.send("r", List.of(t)).getFirst();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment target = arena.allocate(d.nbytes());
            try (ReceivedTensor in = consumer.receive(d)) {
                MemorySegment.copy(in.data(), 0, target, 0, d.nbytes());
            }
            assertEquals(crc(t.data()), crc(target));
        }
        producer.ack(List.of(d.uuid()));
    }

    @Test
    void unknownAndRepeatedAcksAreCountedAndFreeNothingElse() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        SplittableRandom r = new SplittableRandom(7);
        List<TensorDescriptor> sent = producer.send("r", List.of(randomTensor(r, DType.F32, 100),
            randomTensor(r, DType.F32, 100)));
        producer.ack(List.of(sent.get(0).uuid()));
        producer.ack(List.of(sent.get(0).uuid(), UUID.randomUUID()));
        TransportStats stats = producer.statsSummary();
        assertEquals(1, stats.acks());
        assertEquals(2, stats.unknownAcks());
        assertEquals(1, stats.inFlight());
        try (ReceivedTensor still = consumer.receive(sent.get(1))) {
            assertEquals(400, still.data().byteSize());
        }
        producer.ack(List.of(sent.get(1).uuid()));
    }

    @Test
    void closedViewRefusesAccess() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        TensorDescriptor d = producer.send("r", List.of(randomTensor(new SplittableRandom(8), DType.U8, 10))).getFirst();
        ReceivedTensor in = consumer.receive(d);
        in.close();
        in.close();
        assertThrows(IllegalStateException.class, in::data);
        producer.ack(List.of(d.uuid()));
    }

    @Test
    void badTensorsAreRefusedAndTheTransportKeepsServing() {
        TensorTransport producer = open("producer");
        MemorySegment bytes = MemorySegment.ofArray(new byte[10]);
        assertThrows(IllegalArgumentException.class, () -> new Tensor(DType.F32, new long[] {3}, bytes));
        assertThrows(IllegalArgumentException.class, () -> new Tensor(DType.U8, new long[] {-10}, bytes));
        assertThrows(IllegalArgumentException.class, () -> new Tensor(DType.U8, new long[9], bytes));
        TensorDescriptor d = producer.send("r", List.of(new Tensor(DType.U8, new long[] {10}, bytes))).getFirst();
        producer.ack(List.of(d.uuid()));
        assertEquals(0, producer.statsSummary().inFlight());
    }

    @Test
    void tensorWhoseFileIsGoneFailsAloneWithATypedException() throws Exception {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        SplittableRandom r = new SplittableRandom(9);
        TensorDescriptor first = producer.send("r", List.of(randomTensor(r, DType.U8, 64))).getFirst();
        unlinkOwnedFiles(producer); // as if the producer had stopped
        assertThrows(SegmentAccessException.class, () -> consumer.receive(first));
        TensorTransport other = open("producer-2");
        Tensor t = randomTensor(r, DType.U8, 64);
        TensorDescriptor second = other.send("r", List.of(t)).getFirst();
        try (ReceivedTensor in = consumer.receive(second)) {
            assertEquals(crc(t.data()), crc(in.data()));
        }
        other.ack(List.of(second.uuid()));
        producer.ack(List.of(first.uuid()));
    }

    @Test
    void stagingManyRequestsGivesTheirDescriptorsAndTheSameBytesAsPerRequestSends() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        SplittableRandom r = new SplittableRandom(13);
        List<StagingRequest<Tensor>> requests = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            requests.add(new StagingRequest<>("request-" + i, List.of(randomTensor(r, DType.BF16, 8, 1024))));
        }
        StagedBatch staged = StagedBatch.stage(producer, requests);
        assertEquals(64, staged.descriptors().size());
        for (int i = 0; i < 64; i++) {
            TensorDescriptor d = staged.descriptors().get(i).getFirst();
            assertEquals("request-" + i, d.requestId());
            assertEquals(d.offset(), staged.offset()[i]);
            assertEquals(d.placement() == Placement.ARENA ? d.fileName() : null,
                staged.segmentIndex()[i] < 0 ? null : staged.segmentNames().get(staged.segmentIndex()[i]));
            try (ReceivedTensor in = consumer.receive(d)) {
                assertEquals(crc(requests.get(i).tensors().getFirst().data()), crc(in.data()));
            }
            producer.ack(List.of(d.uuid()));
        }
        assertEquals(0, producer.statsSummary().inFlight());
    }

    @Test
    void aFanOutTensorIsFreedByTheLastOfItsNamedConsumersOnly() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        Tensor t = randomTensor(new SplittableRandom(12), DType.U8, 4096);
        TensorDescriptor d = producer.send("r", List.of(t), List.of("a", "b", "c")).getFirst();
        List<UUID> uuid = List.of(d.uuid());

        producer.ack("a", uuid);
        producer.ack("a", uuid);        // a repeat counts once
        producer.ack("stranger", uuid); // not named: ignored
        producer.ack(uuid);             // says not who: cannot count
        TransportStats stats = producer.statsSummary();
        assertEquals(1, stats.inFlight());
        assertEquals(1, stats.partiallyAcked());
        assertEquals(3, stats.ignoredAcks());
        producer.ack("b", uuid);
        try (ReceivedTensor in = consumer.receive(d)) {
            assertEquals(crc(t.data()), crc(in.data()), "still intact for the last consumer");
        }
        producer.ack("c", uuid);
        stats = producer.statsSummary();
        assertEquals(0, stats.inFlight());
        assertEquals(0, stats.partiallyAcked());
        assertEquals(1, stats.acks());
        producer.ack("c", uuid);
        assertEquals(1, producer.statsSummary().unknownAcks(), "after the last share it is no longer in flight");
        assertThrows(IllegalArgumentException.class, () -> producer.send("r", List.of(t), List.of()));
        assertThrows(IllegalArgumentException.class, () -> producer.send("r", List.of(t), List.of("a", "a")));
    }

    @Test
    void unlinkOwnedFilesRemovesFilesWhileMappedViewsStayReadable() {
        TensorTransport producer = open("producer");
        TensorTransport consumer = open("consumer");
        Tensor t = randomTensor(new SplittableRandom(10), DType.F16, 512);
        TensorDescriptor d = producer.send("r", List.of(t)).getFirst();
        try (ReceivedTensor in = consumer.receive(d)) {
            unlinkOwnedFiles(producer);
            assertEquals(List.of(), ShmTestDir.list(shm.path()).stream().filter(f -> f.contains("_producer_")).toList(),
                "none of the producer's files stays");
            assertEquals(crc(t.data()), crc(in.data()), "a mapped view survives the unlink");
        }
        producer.ack(List.of(d.uuid()));
    }

    @Test
    void closeLeavesNoFiles() {
        TensorTransport producer = open("producer");
        producer.send("r", List.of(randomTensor(new SplittableRandom(11), DType.U8, 4096)));
        assertTrue(!ShmTestDir.list(shm.path()).isEmpty());
        producer.close();
        producer.close();
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
        assertThrows(IllegalStateException.class, () -> producer.send("r", List.of()));
        assertTrue(Files.isDirectory(shm.path()));
    }

    /** A shutdown hook closes the transport while application threads still send (the SIGTERM case). */
    @Test
    void closeWhileOtherThreadsSendLeavesNoFiles() throws Exception {
        Tensor t = randomTensor(new SplittableRandom(13), DType.U8, 4096);
        for (int round = 0; round < 40; round++) {
            TensorTransport producer = create("producer");
            List<Throwable> unexpected = new CopyOnWriteArrayList<>();
            CountDownLatch sending = new CountDownLatch(4 * 10);
            List<Thread> senders = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                senders.add(Thread.ofPlatform().start(() -> {
                    try {
                        while (true) {
                            producer.send("r", List.of(t));
                            sending.countDown();
                        }
                    } catch (IllegalStateException closed) {
                        // the expected end of every sender
                    } catch (Throwable e) {
                        unexpected.add(e);
                    }
                }));
            }
            sending.await();
            producer.close();
            for (Thread sender : senders) {
                sender.join();
            }
            assertEquals(List.of(), unexpected, "round " + round);
            assertEquals(List.of(), ShmTestDir.list(shm.path()), "round " + round + ": a send racing close left a file");
        }
    }
}
