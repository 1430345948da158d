package io.mstar.transport.remote;

import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.codec.DescriptorCodec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Queue;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * Tensors that landed here and confirmations of tensors sent from here, queued by the event loop for the local
 * mailbox's poll, which hands them to its listener on the polling thread.
 */
final class InboundQueue {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);

    /** A tensor or an ACK from another node; {@code descriptor} null for an ACK. */
    private record Inbound(String from, TensorDescriptor descriptor, long ackMsb, long ackLsb) {
    }

    private final String entity;
    private final RemoteCounters counters;
    private final Queue<Inbound> queue = new ConcurrentLinkedQueue<>();
    private final MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]); // poller's
    private int delivering; // records being handed to a listener now (more than one when it polls again)
    private volatile Runnable arrived = () -> { }; // wakes the mailbox's waiting threads

    InboundQueue(String entity, RemoteCounters counters) {
        this.entity = entity;
        this.counters = counters;
    }

    /** Who to tell that something was queued: the local mailbox's wake, for its threads that wait. */
    void onArrival(Runnable wake) {
        this.arrived = wake;
    }

    void tensor(String from, TensorDescriptor descriptor) {
        queue.add(new Inbound(from, descriptor, 0, 0));
        arrived.run();
    }

    void ack(String from, long msb, long lsb) {
        queue.add(new Inbound(from, null, msb, lsb));
        arrived.run();
    }

    /** Whether anything waits to be delivered. */
    boolean hasItems() {
        return !queue.isEmpty();
    }

    /** As {@link RemoteLink#deliver}. */
    int deliver(TensorChannel.Listener objects, TensorChannel.RecordListener records, int limit) {
        int delivered = 0;
        Inbound in;
        while (delivered < limit && (in = queue.poll()) != null) {
            delivered++;
            try {
                if (in.descriptor() == null) {
                    if (objects != null) {
                        objects.acks(in.from(), List.of(new UUID(in.ackMsb(), in.ackLsb())));
                    } else {
                        records.ack(in.from(), in.ackMsb(), in.ackLsb());
                    }
                } else if (objects != null) {
                    objects.descriptors(in.from(), List.of(in.descriptor()));
                } else {
                    // A listener that polls again (nested) must not overwrite the record its caller still reads.
                    MemorySegment out = delivering++ == 0 ? record
                        : MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
                    try {
                        records.descriptor(in.from(), out, 0, DescriptorCodec.encode(in.descriptor(), out, 0));
                    } finally {
                        delivering--;
                    }
                }
            } catch (RuntimeException e) {
                counters.refused.incrementAndGet();
                LOG.warn("message from another node refused: entity={}, from={}: {}", entity, in.from(), e.toString());
            }
        }
        return delivered;
    }
}
