package io.mstar.transport.remote;

import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.liveness.SlotHolds;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.UUID;
import java.util.function.BooleanSupplier;

/**
 * This process's mailbox when it takes part in the cross-node path: entities that
 * {@code MSTAR_REMOTE_ENTITIES} places on other nodes are reached through the {@link RemoteLink}, every
 * other one through the shared-memory mailbox. Sends to a remote entity go over authenticated TCP; tensors and
 * confirmations from other nodes come out of {@link #poll} after the ring's messages; ACKs to a producer
 * whose tensors came over the network free the slots they landed in here.
 */
public final class RoutedMailbox implements TensorChannel, TensorChannel.Records {
    private final ShmMailbox local;
    private final RemoteLink remote;
    private final Deployment deployment; // the namespace records are decoded against
    private volatile ConsumerLiveness producer; // told which consumer each remote send went to

    private RoutedMailbox(ShmMailbox local, RemoteLink remote, Deployment deployment) {
        this.local = local;
        this.remote = remote;
        this.deployment = deployment;
        remote.onInbound(local::wake);
    }

    /** Starts the cross-node path next to {@code local}, which the returned mailbox owns from then on. */
    public static RoutedMailbox open(ShmMailbox local, Deployment deployment) {
        return new RoutedMailbox(local, RemoteLink.start(deployment), deployment);
    }

    /**
     * As {@link ShmMailbox#attach}: the transport learns where each batch went, local or remote, and asks this
     * mailbox whether a consumer lives (a remote one: whether what was sent to it may still be confirmed); a
     * slot sent to another node stays held ({@code slots}) until the socket has taken its bytes.
     */
    public void attach(ConsumerLiveness transport, SlotHolds slots) {
        remote.holdSlotsOf(slots);
        local.attach(transport);
        producer = transport;
        transport.watch(this::isAlive); // replaces the mailbox's own check with one that knows remote consumers
    }

    private boolean isAlive(String key) {
        int at = key.indexOf('@');
        return remote.isRemote(at < 0 ? key : key.substring(0, at)) ? remote.isAlive(key) : local.isAlive(key);
    }

    @Override
    public void sendDescriptors(String toEntity, List<TensorDescriptor> descriptors) {
        if (!remote.isRemote(toEntity)) {
            local.sendDescriptors(toEntity, descriptors);
            return;
        }
        String key;
        try {
            key = remote.send(toEntity, descriptors);
        } catch (PeerUnavailableException e) {
            ConsumerLiveness attached = producer;
            if (attached != null) {
                attached.neverReached(toEntity, descriptors.stream().map(TensorDescriptor::uuid).toList());
            }
            throw e;
        }
        ConsumerLiveness attached = producer;
        if (attached != null) {
            attached.sentTo(key, descriptors.stream().map(TensorDescriptor::uuid).toList());
        }
    }

    @Override
    public void postRecord(String toEntity, MemorySegment record, long offset, int length) {
        if (remote.isRemote(toEntity)) {
            sendDescriptorRecord(toEntity, record, offset, length); // another node ACKs by message
        } else {
            local.postRecord(toEntity, record, offset, length);
        }
    }

    @Override
    public void sendDescriptorRecord(String toEntity, MemorySegment record, long offset, int length) {
        if (!remote.isRemote(toEntity)) {
            local.sendDescriptorRecord(toEntity, record, offset, length);
            return;
        }
        if (DescriptorCodec.recordLength(record, offset, length) != length) {
            throw new DescriptorFormatException("length", "the record declares another length than " + length);
        }
        byte[] bytes = record.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
        sendDescriptors(toEntity, List.of(DescriptorCodec.decode(bytes, deployment)));
    }

    @Override
    public void sendAcks(String toEntity, Collection<UUID> uuids) {
        if (remote.landsFrom(toEntity)) {
            remote.ackLanded(uuids);
        } else {
            local.sendAcks(toEntity, uuids);
        }
    }

    @Override
    public void sendAck(String toEntity, long uuidMsb, long uuidLsb) {
        if (remote.landsFrom(toEntity)) {
            remote.ackLanded(uuidMsb, uuidLsb);
        } else {
            local.sendAck(toEntity, uuidMsb, uuidLsb);
        }
    }

    @Override
    public void sendRefusal(String toEntity, long uuidMsb, long uuidLsb) {
        if (remote.landsFrom(toEntity)) {
            remote.ackLanded(uuidMsb, uuidLsb); // a landed tensor's slot is this node's: freed here
        } else {
            local.sendRefusal(toEntity, uuidMsb, uuidLsb);
        }
    }

    @Override
    public void sendAcks(String toEntity, long[] uuidHalves, int count) {
        if (!remote.landsFrom(toEntity)) {
            local.sendAcks(toEntity, uuidHalves, count);
            return;
        }
        for (int k = 0; k < count; k++) {
            remote.ackLanded(uuidHalves[2 * k], uuidHalves[2 * k + 1]);
        }
    }

    @Override
    public boolean awaitPeer(String entity, Duration timeout) throws InterruptedException {
        return remote.isRemote(entity) ? remote.awaitPeer(entity, timeout) : local.awaitPeer(entity, timeout);
    }

    @Override
    public int poll(Listener listener, int limit) {
        int read = local.poll(listener, limit);
        return read + remote.deliver(listener, null, limit - read);
    }

    @Override
    public int pollRecords(RecordListener listener, int limit) {
        int read = local.pollRecords(listener, limit);
        return read + remote.deliver(null, listener, limit - read);
    }

    @Override
    public int receive(Listener listener, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            int read = poll(listener, 64);
            long left = deadline - System.nanoTime();
            if (read > 0 || left <= 0) {
                return read;
            }
            awaitMessage(left, () -> false, true);
        }
    }

    /** As {@link ShmMailbox#awaitMessage}, woken too by tensors and ACKs from other nodes. */
    public void awaitMessage(long timeoutNs, BooleanSupplier ready, boolean yields) {
        local.awaitMessage(timeoutNs, () -> remote.hasInbound() || ready.getAsBoolean(), yields);
    }

    @Override
    public Records records() {
        return this;
    }

    /** As {@link RemoteLink#sendsAgain}. */
    public void sendsAgain(long msb, long lsb, long inDoubtMsb, long inDoubtLsb) {
        remote.sendsAgain(msb, lsb, inDoubtMsb, inDoubtLsb);
    }

    /** Where refusals of tensors sent from here by a remote node are told (the endpoint reports them). */
    public void onRefused(RemoteLink.RefusalListener listener) {
        remote.onRefused(listener);
    }

    /** The cross-node path under this mailbox (tests look inside). */
    RemoteLink link() {
        return remote;
    }

    /** The cross-node path's counters. */
    /** The local mailbox underneath (shared memory). */
    public ShmMailbox local() {
        return local;
    }

    /** The cross-node link's counters. */
    public RemoteStats remoteStats() {
        return remote.stats();
    }

    /** Closes the cross-node path, then the shared-memory mailbox. */
    @Override
    public void close() {
        try {
            remote.close();
        } finally {
            local.close();
        }
    }
}
