package io.mstar.transport.docs;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorChannels;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.UUID;

/** The README's producer, as a program: sends one image tensor to "consumer" and waits for its ACK. */
public final class ReadmeProducer {
    private ReadmeProducer() {
    }

    public static void main(String[] args) throws Exception {
        // tag::producer[]
        Deployment deployment = Deployment.fromEnvironment("my-pipeline", "producer");
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorChannels.mailbox(deployment, transport)) {
            mailbox.awaitPeer("consumer", Duration.ofSeconds(30));
            MemorySegment image = MemorySegment.ofArray(new float[3 * 224 * 224]); // your tensor's bytes
            List<TensorDescriptor> sent = transport.send("request-1", List.of(Tensor.of(DType.F32, image, 3, 224, 224)));
            mailbox.sendDescriptors("consumer", sent);
            while (transport.statsSummary().inFlight() > 0) { // until the consumer's ACK frees the slot
                mailbox.receive(new TensorChannel.Listener() {
                    public void descriptors(String from, List<TensorDescriptor> batch) { }
                    public void acks(String from, List<UUID> uuids) { transport.ack(from, uuids); }
                }, Duration.ofSeconds(1));
            }
        }
        // end::producer[]
        System.out.println("producer: sent and ACKed");
    }
}
