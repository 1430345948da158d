package io.mstar.transport.docs;

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
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.staging.DeviceTensor;
import io.mstar.transport.staging.DeviceTransfers;
import io.mstar.transport.staging.StagedBatch;
import io.mstar.transport.staging.StagingRequest;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
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

    static TensorEndpoint openEndpoint() {
        // tag::endpointOpen[]
        Deployment deployment = Deployment.fromEnvironment("ipc:///run/conductor.sock", "vision-encoder-0");
        TensorEndpoint endpoint = TensorEndpoint.open(deployment);
        // end::endpointOpen[]
        return endpoint;
    }

    static Delivery endpointSend(TensorEndpoint endpoint, MemorySegment bytes) throws InterruptedException {
        // tag::endpointSend[]
        Tensor image = Tensor.of(DType.BF16, bytes, 3, 224, 224);  // bytes: contiguous, heap or native
        Delivery delivery = endpoint.send("speech-0", "request-17", image);
        if (delivery.await(Duration.ofSeconds(5)) != Delivery.Status.DELIVERED) {
            System.err.println("request-17: " + delivery.failure() + ", " + delivery.detail());
        }
        // end::endpointSend[]
        return delivery;
    }

    static int endpointReceive(TensorEndpoint endpoint, Consumer<MemorySegment> consume) {
        // tag::endpointReceive[]
        int read = endpoint.receive(tensor -> {
            MemorySegment view = tensor.data();              // the producer's bytes: read-only, in place
            consume.accept(view);
        }, Duration.ofMillis(100));                          // each tensor is ACKed when the handler returns
        // end::endpointReceive[]
        return read;
    }

    static List<ReceivedTensor> keep(TensorEndpoint endpoint) {
        // tag::keep[]
        List<ReceivedTensor> held = new ArrayList<>();
        endpoint.poll(tensor -> held.add(tensor.keep()), 16);  // kept: not ACKed when the handler returns
        // ... later, once done with them:
        held.forEach(ReceivedTensor::close);                   // each close sends its ACK
        // end::keep[]
        return held;
    }

    static TensorEndpoint polledOutcomes(Deployment deployment, Tensor tensor, long[] inFlight) {
        // tag::polledOutcomes[]
        DeliveryListener mine = new DeliveryListener() {
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                inFlight[0]--;                                 // only ever on the polling thread: no lock
            }

            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                inFlight[0]--;
            }

            public boolean toldWhenPolled() {
                return true;                                   // told in pollOutcomes/awaitOutcomes only
            }
        };
        TensorEndpoint endpoint = TensorEndpoint.open(deployment, mine);
        long key = endpoint.post("speech-0", "request-19", tensor); // the uuid's low half: the outcome's uuidLsb
        inFlight[0]++;
        endpoint.pollOutcomes(64);                             // reads the ACKs waiting, tells what they decided
        endpoint.awaitOutcomes(64, Duration.ofSeconds(1));     // or waits for at least one
        // end::polledOutcomes[]
        return endpoint;
    }

    static TensorEndpoint.Stats stats(TensorEndpoint endpoint) {
        // tag::endpointStats[]
        TensorEndpoint.Stats stats = endpoint.stats();
        long sent = stats.transport().tensorsSent();           // TransportStats: sends, ACKs, spills, latencies
        long garbage = stats.mailbox().garbageRecords();       // what the mailbox refused or skipped
        stats.remote().ifPresent(remote -> remote.landed());   // the cross-node link's, on that path
        // end::endpointStats[]
        return stats;
    }

    static TensorEndpoint outcomes(Deployment deployment, Tensor tensor, AtomicLong done, Queue<String> retry) {
        // tag::outcomes[]
        DeliveryListener outcomes = new DeliveryListener() {
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                done.incrementAndGet();
            }

            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                retry.add(requestId);                          // with why: failure, and whom: detail
            }
        };
        TensorEndpoint endpoint = TensorEndpoint.open(deployment, outcomes);
        endpoint.post("speech-0", "request-18", tensor);       // allocates nothing; the outcome goes to the listener
        // end::outcomes[]
        return endpoint;
    }

    static long repost(TensorEndpoint endpoint, String requestId, Tensor tensor, long uuidMsb, long uuidLsb) {
        // tag::repost[]
        // told IN_DOUBT for (uuidMsb, uuidLsb): the same bytes again, as a repeat of that send
        long key = endpoint.repost("decode-0", requestId, tensor, uuidMsb, uuidLsb);
        // the consumer's node hands it over only if the first did not land there; else it confirms it (DELIVERED)
        // end::repost[]
        return key;
    }

    static Delivery fanOut(TensorEndpoint endpoint, Tensor hidden) {
        // tag::fanOut[]
        List<String> readers = List.of("decoder-0", "speech-0", "logger");
        Delivery delivery = endpoint.send(readers, "request-17", hidden);   // freed once all three have ACKed
        // end::fanOut[]
        return delivery;
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
        try (ReceivedTensor t = transport.receive(descriptor)) { // or a copy into memory of yours
            MemorySegment.copy(t.data(), 0, myBuffer, 0, descriptor.nbytes());
        }
        channel.sendAcks(descriptor.producer(), List.of(descriptor.uuid()));
        // end::receive[]
    }

    static void hotLoop(TensorTransport transport, Tensor tensor, MemorySegment buffer) {
        // tag::hotLoop[]
        int length = transport.records().sendInto("request-17", tensor, buffer, 0);   // the descriptor's record, in place
        // ... the record travels; its ACK names the uuid's halves:
        transport.records().ack(DescriptorCodec.uuidMsb(buffer, 0), DescriptorCodec.uuidLsb(buffer, 0));
        // end::hotLoop[]
        assert length > 0;
    }

    /** The record path through the mailbox: one round trip; returns how many ACKs the producer handled. */
    static int recordPath(TensorTransport producer, TensorChannel producerBox, TensorTransport consumer,
                          TensorChannel consumerBox, Tensor tensor, MemorySegment record, TensorRecords.Reader reader) {
        // tag::recordPath[]
        // The producer sends the record that sendInto (or a claim's publish(record, 0)) wrote, as it is.
        producerBox.records().sendDescriptorRecord("speech-0", record, 0, producer.records().sendInto("request-19", tensor, record, 0));

        // Both sides take records and ACKs in place, one by one.
        TensorChannel.RecordListener consumerSide = new TensorChannel.RecordListener() {
            public void descriptor(String from, MemorySegment in, long offset, int length) {
                consumer.records().receive(in, offset, length, reader);   // validated, then read in place
                consumerBox.records().sendAck(from, DescriptorCodec.uuidMsb(in, offset), DescriptorCodec.uuidLsb(in, offset));
            }
            public void ack(String from, long msb, long lsb) { }
        };
        TensorChannel.RecordListener producerSide = new TensorChannel.RecordListener() {
            public void descriptor(String from, MemorySegment in, long offset, int length) { }
            public void ack(String from, long msb, long lsb) { producer.records().ack(msb, lsb); }
        };
        consumerBox.records().pollRecords(consumerSide, 64);
        int acks = producerBox.records().pollRecords(producerSide, 64);
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
        TensorChannel channel = TensorTransports.mailbox(deployment, transport);
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
        transport.capability(ConsumerLiveness.class).ifPresent(liveness -> {
            liveness.watch(entity -> isRunning(entity));            // once: how to tell a consumer is alive
            liveness.sentTo(consumer, descriptors.stream().map(TensorDescriptor::uuid).toList());
        });
        // end::ownChannelLiveness[]
    }

    private static boolean isRunning(String entity) {
        return true;
    }

    static StagedBatch stage(TensorTransport transport, List<Request> batch) {
        // tag::stage[]
        List<StagingRequest<Tensor>> step = new ArrayList<>();
        for (Request r : batch) {
            step.add(new StagingRequest<>(r.id(), List.of(r.hiddenState())));
        }
        StagedBatch staged = StagedBatch.stage(transport, step);
        List<List<TensorDescriptor>> perRequest = staged.descriptors();   // in the order of the requests
        int[] segment = staged.segmentIndex();                             // or the placements as two columns:
        long[] offset = staged.offset();                                   // staged.segmentNames().get(segment[i]), offset[i]
        // end::stage[]
        return staged;
    }

    static StagedBatch stageFromDevice(TensorTransport transport, List<StagingRequest<DeviceTensor>> requests) {
        // tag::device[]
        DeviceTransfers device = transport.capability(DeviceTransfers.class)
            .orElseThrow(() -> new IllegalStateException("device tensors need the arena (MSTAR_SHM_ARENA=1)"));
        StagedBatch staged = device.stageFromDevice(requests, false);     // one host wait for every copy
        // end::device[]
        return staged;
    }
}
