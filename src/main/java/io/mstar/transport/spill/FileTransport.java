package io.mstar.transport.spill;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportStats;
import io.mstar.transport.acks.FanOutAcks;
import io.mstar.transport.acks.TensorFates;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.Sweeper;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.metrics.TransportJmx;
import io.mstar.transport.shm.MappedView;
import io.mstar.transport.shm.PeerSegments;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.management.ObjectName;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Future;

/**
 * The file transport: every tensor in a file of its own ({@link SpillStore}), read by the consumer and
 * removed on the ACK. It has no device path and no consumer liveness: a file that a dead consumer never
 * ACKed stays until {@link #close()} (or, once this producer is gone too, the next sweep). As a consumer
 * it reads every placement: a producer whose {@code MSTAR_SHM_ARENA} differs sends arena slots, read in
 * place from the producer's segments ({@link PeerSegments}).
 */
public final class FileTransport implements TensorTransport, TensorRecords, TensorFates.Source {
    private static final Logger LOG = LoggerFactory.getLogger(FileTransport.class);

    private final String entity;
    private final String namespace;
    private final SpillStore files;
    private final PeerSegments peers; // arena producers' segments, mapped on the first tensor from each
    private final Sweeper sweeper;
    private final TransportCounters counters = new TransportCounters();
    private final FanOutAcks fanOut = new FanOutAcks(counters);
    private final Future<ObjectName> jmxName;
    private final CloseOnce closer = new CloseOnce();
    private volatile TensorFates fates = TensorFates.NONE;

    /** A file transport for a process of the deployment. */
    public static FileTransport open(Deployment deployment) {
        return new FileTransport(Owner.of(deployment), deployment.config().reclaimInterval());
    }

    /**
     * @param owner           whose files these are
     * @param reclaimInterval how often this process sweeps dead owners' files ({@link Sweeper})
     */
    public FileTransport(Owner owner, Duration reclaimInterval) {
        this.entity = owner.entity();
        this.namespace = owner.namespace().id();
        this.files = new SpillStore(owner);
        this.peers = new PeerSegments(owner.dir(), counters);
        this.sweeper = Sweeper.join(owner.dir(), reclaimInterval);
        ShutdownCleanup.register(this);
        this.jmxName = TransportJmx.register(this, owner.namespace().id(), entity, name -> null);
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors) {
        checkOpen();
        List<TensorDescriptor> sent = new ArrayList<>(tensors.size());
        boolean ok = false;
        try {
            for (Tensor tensor : tensors) {
                sent.add(files.write(requestId, tensor, Owner.newUuid()));
                counters.sent(tensor.nbytes());
            }
            ok = true;
            return sent;
        } finally {
            if (!ok) {
                sent.forEach(d -> files.release(d.uuid()));
            }
        }
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors, List<String> consumers) {
        return fanOut.send(consumers, () -> send(requestId, tensors));
    }

    @Override
    public TensorClaim claim(String requestId, DType dtype, long... shape) {
        checkOpen();
        return files.claim(requestId, dtype, shape.clone(), Owner.newUuid(), counters, false);
    }

    @Override
    public ReceivedTensor receive(TensorDescriptor d) {
        checkOpen();
        MappedView tensor = (d.placement() == Placement.SPILL ? files.read(d) : peers.open(d))
            .timed(counters.receiveToRelease());
        counters.received();
        return tensor;
    }

    @Override
    public TensorRecords records() {
        return this;
    }

    @Override
    public int sendInto(String requestId, Tensor tensor, MemorySegment out, long offset) {
        return DescriptorCodec.encode(send(requestId, List.of(tensor)).getFirst(), out, offset);
    }

    @Override
    public int sendWritten(String requestId, DType dtype, long[] shape, TensorRecords.Writer writer, MemorySegment out,
                           long offset) {
        try (TensorClaim claim = claim(requestId, dtype, shape)) {
            writer.write(claim.memory());
            return claim.publish(out, offset);
        }
    }

    @Override
    public void ack(long uuidMsb, long uuidLsb) {
        ack(List.of(new UUID(uuidMsb, uuidLsb)));
    }

    @Override
    public void ack(String consumer, long uuidMsb, long uuidLsb) {
        ack(consumer, List.of(new UUID(uuidMsb, uuidLsb)));
    }

    @Override
    public void refused(String consumer, long uuidMsb, long uuidLsb) {
        UUID uuid = new UUID(uuidMsb, uuidLsb);
        if (fanOut.frees(uuid, consumer)) {
            release(uuid, true);
        }
    }

    @Override
    public void reportFatesTo(TensorFates reportTo) {
        this.fates = reportTo;
    }

    @Override
    public void receive(MemorySegment record, long offset, int length, TensorRecords.Reader reader) {
        try (MappedView tensor = (MappedView) receive(DescriptorCodec.decode(record, offset, length, namespace))) {
            reader.read(tensor.data(), 0, tensor.data().byteSize());
            tensor.checkIntact(); // a slot reused while it was read is refused
        }
    }

    @Override
    public void ack(String consumer, Collection<UUID> uuids) {
        for (UUID uuid : uuids) {
            if (fanOut.frees(uuid, consumer)) {
                release(uuid, false);
            }
        }
    }

    @Override
    public void ack(Collection<UUID> uuids) {
        for (UUID uuid : uuids) {
            if (fanOut.freesUnattributed(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits())) {
                release(uuid, false);
            }
        }
    }

    private void release(UUID uuid, boolean refused) {
        long sentAt = files.release(uuid);
        counters.freed(sentAt, refused);
        if (sentAt == TransportCounters.NOT_IN_FLIGHT) {
            LOG.debug("ACK of a tensor not in flight, ignored: uuid={}", uuid);
        } else {
            fates.freed(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), TensorFates.Fate.ACKED, null);
        }
    }

    /** The file transport has no device path and no liveness check: always empty. */
    @Override
    public <T> Optional<T> capability(Class<T> type) {
        return Optional.empty();
    }

    @Override
    public TransportStats statsSummary() {
        return counters.snapshot("file", null, files.inFlight(), 0, fanOut.partiallyAcked(), peers.mapped(), 0, 0,
            "not used by the file transport");
    }

    /** Unlinks every spill file this transport created, for a process that is stopping. */
    public void unlinkOwnedFiles() {
        files.unlinkAll();
    }

    @Override
    public void close() {
        closer.close(() -> {
            ShutdownCleanup.unregister(this);
            TransportJmx.unregister(jmxName);
            counters.abandonOpenClaims(entity);
            try {
                files.close();
            } finally {
                try {
                    peers.close();
                } finally {
                    sweeper.leave();
                }
            }
        });
    }

    private void checkOpen() {
        if (closer.isClosed()) {
            throw new IllegalStateException("file transport is closed: entity=" + entity);
        }
    }
}
