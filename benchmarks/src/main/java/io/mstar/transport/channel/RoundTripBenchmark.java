package io.mstar.transport.channel;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * One tensor's whole round trip in one thread, through the public API and the built-in mailbox, with
 * both processes' sides in this JVM: send (or claim and publish) -> descriptors through the consumer's
 * mailbox -> receive and read in place -> ACK through the producer's mailbox -> ACK. Run with
 * {@code -prof gc}: {@code gc.alloc.rate.norm} is the garbage one tensor leaves, mailbox included.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED")
public class RoundTripBenchmark {
    @Param({"4096"})
    public int bytes;

    private Arena scratch;
    private Path dir;
    private TensorTransport producer;
    private TensorTransport consumer;
    private TensorChannel producerBox;
    private TensorChannel consumerBox;
    private List<Tensor> tensors;
    private long checksum;
    private final List<UUID> acks = new ArrayList<>();
    private final TensorChannel.Listener consumerSide = new TensorChannel.Listener() {
        @Override
        public void descriptors(String from, List<TensorDescriptor> batch) {
            acks.clear();
            for (TensorDescriptor d : batch) {
                try (ReceivedTensor t = consumer.receive(d)) {
                    checksum += t.data().get(ValueLayout.JAVA_BYTE, 0);
                }
                acks.add(d.uuid());
            }
            consumerBox.sendAcks(from, acks);
        }

        @Override
        public void acks(String from, List<UUID> uuids) {
        }
    };
    private final TensorChannel.Listener producerSide = new TensorChannel.Listener() {
        @Override
        public void descriptors(String from, List<TensorDescriptor> batch) {
        }

        @Override
        public void acks(String from, List<UUID> uuids) {
            producer.ack(from, uuids);
        }
    };

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        scratch = Arena.ofShared();
        tensors = List.of(Tensor.of(DType.U8, scratch.allocate(bytes, 4096), bytes));
        dir = Files.createTempDirectory(Path.of("/dev/shm"), "mstar-bench-");
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "64", TransportConfig.MAX_SEGMENTS, "1")::get);
        Deployment producerDeployment = Deployment.of(config, "round-trip", "producer");
        Deployment consumerDeployment = producerDeployment.withEntity("consumer");
        producer = TensorTransports.create(producerDeployment, false);
        consumer = TensorTransports.create(consumerDeployment, false);
        producerBox = TensorTransports.mailbox(producerDeployment);
        consumerBox = TensorTransports.mailbox(consumerDeployment);
        producerEndpoint = TensorEndpoint.open(producerDeployment.withEntity("endpoint-producer"), outcomes);
        consumerEndpoint = TensorEndpoint.open(producerDeployment.withEntity("endpoint-consumer"));
        producerEndpoint.prepareToSend();
        polledProducer = TensorEndpoint.open(producerDeployment.withEntity("polled-producer"), polled);
        polledProducer.prepareToSend();
        shape = new long[] {bytes};
    }

    // The endpoint's fast path: post (or claim and post), the consumer's handler reads in place and is ACKed
    // on return, the producer's endpoint carries the ACK to its transport and tells the listener.
    private TensorEndpoint producerEndpoint;
    private TensorEndpoint consumerEndpoint;
    private volatile long delivered; // the ACK thread may tell it
    private final DeliveryListener outcomes = new DeliveryListener() {
        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            delivered++;
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            throw new IllegalStateException("the round trip failed: " + failure + ", " + detail);
        }
    };
    private final TensorHandler reads = tensor -> checksum += tensor.memory().get(ValueLayout.JAVA_BYTE, tensor.offset());
    private final TensorHandler noTensor = tensor -> {
        throw new IllegalStateException("the producer got a tensor");
    };

    /** The endpoint's fast path: one tensor posted, read in place, ACKed on return, its outcome told. */
    @Benchmark
    public long endpointPostPath() {
        producerEndpoint.post("endpoint-consumer", "request", tensors.getFirst());
        return finishEndpoint();
    }

    /** As {@link #endpointPostPath()}, the tensor written in a claimed slot. */
    @Benchmark
    public long endpointClaimPath() {
        try (TensorClaim claim = producerEndpoint.claim("request", DType.U8, shape)) {
            claim.memory().set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            producerEndpoint.post("endpoint-consumer", claim);
        }
        return finishEndpoint();
    }

    // The arena-claim producer as a user writes it on the endpoint: the key post returns matches the outcome,
    // which is told on this thread (a listener toldWhenPolled): no string, queue or lock per tensor.
    private TensorEndpoint polledProducer;
    private long key;
    private long matched;
    private final DeliveryListener polled = new DeliveryListener() {
        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            matched += uuidLsb == key ? 1 : 0;
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            throw new IllegalStateException("the round trip failed: " + failure + ", " + detail);
        }

        @Override
        public boolean toldWhenPolled() {
            return true;
        }
    };

    private long[] shape;
    private final TensorRecords.Writer fill = room -> room.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);

    /**
     * The arena-claim producer on the endpoint: room claimed, written in place and posted in one call (no claim
     * object), the outcome matched by the key {@code post} returns and polled on this thread.
     */
    @Benchmark
    public long endpointWrittenPolledPath() {
        long before = matched;
        key = polledProducer.post("endpoint-consumer", "request", DType.U8, shape, fill);
        return finishPolled(before);
    }

    /** As {@link #endpointClaimPath()}, the outcome matched by the key {@code post} returns and polled here. */
    @Benchmark
    public long endpointClaimPolledPath() {
        long before = matched;
        try (TensorClaim claim = polledProducer.claim("request", DType.U8, shape)) {
            claim.memory().set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            key = polledProducer.post("endpoint-consumer", claim);
        }
        return finishPolled(before);
    }

    private long finishPolled(long before) {
        int read = 0;
        for (int attempt = 0; attempt < 3 && read == 0; attempt++) {
            read = consumerEndpoint.poll(reads, 16);
        }
        long deadline = System.nanoTime() + 1_000_000_000L; // the ACK thread may be reading that ACK right now
        while (matched == before && System.nanoTime() - deadline < 0) {
            polledProducer.pollOutcomes(16);
        }
        if (read != 1 || matched != before + 1) {
            throw new IllegalStateException("the round trip lost a message: read=" + read + ", matched="
                + (matched - before));
        }
        return checksum;
    }

    private long finishEndpoint() {
        long before = delivered;
        int read = 0;
        for (int attempt = 0; attempt < 3 && read == 0; attempt++) {
            read = consumerEndpoint.poll(reads, 16);
        }
        for (int attempt = 0; attempt < 1000 && delivered == before; attempt++) {
            producerEndpoint.poll(noTensor, 16); // or the endpoint's ACK thread reads it
        }
        if (read != 1 || delivered != before + 1) {
            throw new IllegalStateException("the round trip lost a message");
        }
        return checksum;
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        producerEndpoint.close();
        polledProducer.close();
        consumerEndpoint.close();
        producerBox.close();
        consumerBox.close();
        producer.close();
        consumer.close();
        Files.delete(dir);
        scratch.close();
    }

    private static int pollOne(TensorChannel box, TensorChannel.Listener listener) {
        int read = 0;
        for (int attempt = 0; attempt < 3 && read == 0; attempt++) {
            read = box.poll(listener, 16);
        }
        return read;
    }

    @Benchmark
    public long sendPath() {
        producerBox.sendDescriptors("consumer", producer.send("request", tensors));
        return finish();
    }

    private final MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
    private final TensorRecords.Reader reader = (memory, offset, nbytes) -> checksum += memory.get(ValueLayout.JAVA_BYTE, offset);
    private final TensorChannel.RecordListener consumerRecords = new TensorChannel.RecordListener() {
        @Override
        public void descriptor(String from, MemorySegment in, long offset, int length) {
            consumer.records().receive(in, offset, length, reader);
            consumerBox.records().sendAck(from, DescriptorCodec.uuidMsb(in, offset), DescriptorCodec.uuidLsb(in, offset));
        }

        @Override
        public void ack(String from, long msb, long lsb) {
        }
    };
    private final TensorChannel.RecordListener producerRecords = new TensorChannel.RecordListener() {
        @Override
        public void descriptor(String from, MemorySegment in, long offset, int length) {
        }

        @Override
        public void ack(String from, long msb, long lsb) {
            producer.records().ack(msb, lsb);
        }
    };

    /** The record path: the descriptor's record sent as is, read in place, ACKed by halves. */
    @Benchmark
    public long recordSendIntoPath() {
        producerBox.records().sendDescriptorRecord("consumer", record, 0, producer.records().sendInto("request", tensors.getFirst(), record, 0));
        return finishRecords();
    }

    @Benchmark
    public long recordClaimPath() {
        try (TensorClaim claim = producer.claim("request", DType.U8, shape)) {
            claim.memory().set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            producerBox.records().sendDescriptorRecord("consumer", record, 0, claim.publish(record, 0));
        }
        return finishRecords();
    }

    private long finishRecords() {
        int read = 0;
        for (int attempt = 0; attempt < 3 && read == 0; attempt++) {
            read = consumerBox.records().pollRecords(consumerRecords, 16);
        }
        int acked = 0;
        for (int attempt = 0; attempt < 3 && acked == 0; attempt++) {
            acked = producerBox.records().pollRecords(producerRecords, 16);
        }
        if (read + acked != 2) {
            throw new IllegalStateException("the round trip lost a message");
        }
        return checksum;
    }

    @Benchmark
    public long claimPath() {
        TensorClaim claim = producer.claim("request", DType.U8, shape);
        claim.memory().set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
        producerBox.sendDescriptors("consumer", List.of(claim.publish()));
        return finish();
    }

    private long finish() {
        // A poll may read only the padding at the ring's end (0 messages): the message is at its start.
        if (pollOne(consumerBox, consumerSide) + pollOne(producerBox, producerSide) != 2) {
            throw new IllegalStateException("the round trip lost a message");
        }
        return checksum;
    }
}
