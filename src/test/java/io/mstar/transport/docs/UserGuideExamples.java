package io.mstar.transport.docs;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.DeviceTensor;
import io.mstar.transport.DeviceTransfers;
import io.mstar.transport.PeerUnavailableException;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.StagedBatch;
import io.mstar.transport.StagingRequest;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorChannels;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorReader;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.codec.DescriptorCodec;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.Consumer;

/**
 * The examples of {@code docs/user-guide.md}, compiled against the API as a user sees it (only the
 * exported packages). Each region between {@code tag::name[]} and {@code end::name[]} is one code block
 * of the guide, character for character ({@link UserGuideTest} checks that and runs them), so a guide that
 * drifts from the API fails the build.
 */
final class UserGuideExamples {
    private UserGuideExamples() {
    }

    /** Where a request's tensor comes from and where a consumer's view goes, in the examples. */
    record Request(String id, Tensor hiddenState) {
    }

    static TensorTransport open() {
        // tag::open[]
        Deployment deployment = Deployment.fromEnvironment("ipc:///run/conductor.sock", "vision-encoder-0");
        TensorTransport transport = TensorTransports.create(deployment, false);
        // end::open[]
        return transport;
    }

    static List<TensorDescriptor> send(TensorTransport transport, MemorySegment bytes) {
        // tag::send[]
        Tensor image = Tensor.of(DType.BF16, bytes, 3, 224, 224);  // bytes: contiguous, heap or native
        List<TensorDescriptor> descriptors = transport.send("request-17", List.of(image));
        // end::send[]
        return descriptors;
    }

    static void claim(TensorTransport transport, TensorChannel channel, Consumer<MemorySegment> fill) {
        // tag::claim[]
        try (TensorClaim claim = transport.claim("request-17", DType.F32, 1024, 1024)) {
            fill.accept(claim.memory());                    // write the tensor in place: no copy
            channel.sendDescriptors("speech-0", List.of(claim.publish()));
        }                                                   // closed unpublished (an exception): aborted
        // end::claim[]
    }

    static void receive(TensorTransport transport, TensorChannel channel, TensorDescriptor descriptor,
                        Consumer<MemorySegment> consume, MemorySegment myBuffer) {
        // tag::receive[]
        try (ReceivedTensor t = transport.receive(descriptor)) {
            MemorySegment view = t.data();                  // read-only, zero copy
            consume.accept(view);
        }
        transport.copyTo(descriptor, myBuffer);             // or a copy into memory of yours
        channel.sendAcks(descriptor.producer(), List.of(descriptor.uuid()));
        // end::receive[]
    }

    static void hotLoop(TensorTransport transport, Tensor tensor, MemorySegment buffer) {
        // tag::hotLoop[]
        int length = transport.sendInto("request-17", tensor, buffer, 0);   // the descriptor's record, in place
        // ... the record travels; its ACK names the uuid's halves:
        transport.ack(DescriptorCodec.uuidMsb(buffer, 0), DescriptorCodec.uuidLsb(buffer, 0));
        // end::hotLoop[]
        assert length > 0;
    }

    /** The record path through the mailbox: one round trip; returns how many ACKs the producer handled. */
    static int recordPath(TensorTransport producer, TensorChannel producerBox, TensorTransport consumer,
                          TensorChannel consumerBox, Tensor tensor, MemorySegment record, TensorReader reader) {
        // tag::recordPath[]
        // The producer sends the record that sendInto (or a claim's publish(record, 0)) wrote, as it is.
        producerBox.sendDescriptorRecord("speech-0", record, 0, producer.sendInto("request-19", tensor, record, 0));

        // Both sides take records and ACKs in place, one by one.
        TensorChannel.RecordListener consumerSide = new TensorChannel.RecordListener() {
            public void descriptor(String from, MemorySegment in, long offset, int length) {
                consumer.receive(in, offset, length, reader);   // validated, then read in place
                consumerBox.sendAck(from, DescriptorCodec.uuidMsb(in, offset), DescriptorCodec.uuidLsb(in, offset));
            }
            public void ack(String from, long msb, long lsb) { }
        };
        TensorChannel.RecordListener producerSide = new TensorChannel.RecordListener() {
            public void descriptor(String from, MemorySegment in, long offset, int length) { }
            public void ack(String from, long msb, long lsb) { producer.ack(msb, lsb); }
        };
        consumerBox.pollRecords(consumerSide, 64);
        int acks = producerBox.pollRecords(producerSide, 64);
        // end::recordPath[]
        return acks;
    }

    static TensorChannel.Listener producerListener(TensorTransport transport, Consumer<TensorDescriptor> work) {
        // tag::listener[]
        TensorChannel.Listener listener = new TensorChannel.Listener() {
            @Override
            public void descriptors(String from, List<TensorDescriptor> batch) {
                batch.forEach(work);                        // a consumer: read, then ACK back to `from`
            }

            @Override
            public void acks(String from, List<UUID> uuids) {
                transport.ack(from, uuids);                 // a producer: free what `from` is done with
            }
        };
        // end::listener[]
        return listener;
    }

    static TensorChannel mailbox(Deployment deployment, TensorTransport transport, TensorChannel.Listener listener,
                                 List<TensorDescriptor> descriptors) {
        // tag::mailbox[]
        TensorChannel channel = TensorChannels.mailbox(deployment, transport);
        channel.sendDescriptors("speech-0", descriptors);
        channel.receive(listener, Duration.ofMillis(100));  // calls listener.descriptors and listener.acks
        // end::mailbox[]
        return channel;
    }

    static void peerGone(TensorTransport transport, TensorChannel channel, List<TensorDescriptor> descriptors)
        throws InterruptedException {
        // tag::peerGone[]
        try {
            channel.sendDescriptors("speech-0", descriptors);
        } catch (PeerUnavailableException e) {
            if (channel.awaitPeer(e.entity(), Duration.ofSeconds(30))) {
                channel.sendDescriptors(e.entity(), descriptors);       // the same tensors, to its new process
            } else {
                transport.ack(descriptors.stream().map(TensorDescriptor::uuid).toList()); // nobody will read them
            }
        }
        // end::peerGone[]
    }

    static TensorDescriptor ownChannel(Deployment deployment, TensorDescriptor descriptor) {
        // tag::ownChannel[]
        byte[] record = DescriptorCodec.encode(descriptor);                   // producer: about 150 bytes
        TensorDescriptor received = DescriptorCodec.decode(record, deployment); // consumer: validated
        // end::ownChannel[]
        return received;
    }

    static void ownChannelLiveness(TensorTransport transport, String consumer, List<TensorDescriptor> descriptors) {
        // tag::ownChannelLiveness[]
        transport.consumerLiveness().ifPresent(liveness -> {
            liveness.watch(entity -> isRunning(entity));            // once: how to tell a consumer is alive
            liveness.sentTo(consumer, descriptors.stream().map(TensorDescriptor::uuid).toList());
        });
        // end::ownChannelLiveness[]
    }

    private static boolean isRunning(String entity) {
        return true;
    }

    static List<TensorDescriptor> fanOut(TensorTransport transport, TensorChannel channel, Tensor hidden) {
        // tag::fanOut[]
        List<String> readers = List.of("decoder-0", "speech-0", "logger");
        List<TensorDescriptor> descriptors = transport.send("request-17", List.of(hidden), readers);
        channel.sendDescriptors(readers, descriptors);       // one call delivers the batch to each of them
        // end::fanOut[]
        return descriptors;
    }

    static StagedBatch stage(TensorTransport transport, List<Request> batch) {
        // tag::stage[]
        List<StagingRequest<Tensor>> step = new ArrayList<>();
        for (Request r : batch) {
            step.add(new StagingRequest<>(r.id(), List.of(r.hiddenState())));
        }
        StagedBatch staged = transport.stage(step);
        List<List<TensorDescriptor>> perRequest = staged.descriptors();   // in the order of the requests
        int[] segment = staged.segmentIndex();                             // or the placements as two columns:
        long[] offset = staged.offset();                                   // staged.segmentNames().get(segment[i]), offset[i]
        // end::stage[]
        return staged;
    }

    static StagedBatch stageFromDevice(TensorTransport transport, List<StagingRequest<DeviceTensor>> requests) {
        // tag::device[]
        DeviceTransfers device = transport.deviceTransfers()
            .orElseThrow(() -> new IllegalStateException("device tensors need the arena (MSTAR_SHM_ARENA=1)"));
        StagedBatch staged = device.stageFromDevice(requests, false);     // one host wait for every copy
        // end::device[]
        return staged;
    }
}
