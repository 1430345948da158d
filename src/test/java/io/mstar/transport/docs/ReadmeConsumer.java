package io.mstar.transport.docs;

import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorChannels;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;

import java.time.Duration;
import java.util.List;
import java.util.UUID;

/** The README's consumer, as a program: reads one tensor in place, ACKs it, and prints what it read. */
public final class ReadmeConsumer {
    private ReadmeConsumer() {
    }

    public static void main(String[] args) {
        // tag::consumer[]
        Deployment deployment = Deployment.fromEnvironment("my-pipeline", "consumer");
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorChannels.mailbox(deployment)) {
            mailbox.receive(new TensorChannel.Listener() {
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    for (TensorDescriptor d : batch) {
                        try (ReceivedTensor tensor = transport.receive(d)) { // the producer's bytes, in place
                            System.out.println("consumer: " + d.dtype() + " " + d.nbytes() + " bytes " + tensor.data());
                        }
                    }
                    mailbox.sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                }
                public void acks(String from, List<UUID> uuids) { }
            }, Duration.ofSeconds(30));
        }
        // end::consumer[]
    }
}
