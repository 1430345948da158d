package io.mstar.transport.spill;

import io.mstar.transport.CapacityException;
import io.mstar.transport.Placement;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportStats;
import io.mstar.transport.acks.FanOutAcks;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Namespace;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.Sweeper;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappedView;
import io.mstar.transport.shm.ShmFullException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One file per tensor in the shared-memory directory, named
 * {@code mstar_<ns>_spill_<entity>_<nonce>_<uuid>}: created exclusively (never following or reusing an
 * existing name), mode 0600, committed before it is written (a full tmpfs fails here, not as SIGBUS),
 * and locked by its owner until it is removed ({@link OwnedFile}: one descriptor per file in flight).
 * The consumer reads it (up to 1 GiB into the heap, larger files mapped read-only for the view's
 * lifetime); the producer unlinks it on the ACK, and all of its files on
 * {@link #unlinkOwnedFiles()} and {@link #close()}.
 *
 * <p>The arena transport uses it as its spill path ({@link #write}, {@link #release}).
 */
public final class FileTransport implements TensorTransport {
    private static final Logger LOG = LoggerFactory.getLogger(FileTransport.class);
    /** Spill files up to this size are read into the heap; larger ones are mapped for the view's lifetime. */
    static final long COPY_OUT_MAX_BYTES = 1L << 30;

    private final Owner owner;
    private final Path dir;
    private final String entity;
    private final Map<UUID, InFlight> owned = new ConcurrentHashMap<>();
    private final AtomicLong tensorsSent = new AtomicLong();
    private final AtomicLong bytesSent = new AtomicLong();
    private final AtomicLong acks = new AtomicLong();
    private final AtomicLong unknownAcks = new AtomicLong();
    private final AtomicLong ignoredAcks = new AtomicLong();
    private final FanOutAcks fanOut = new FanOutAcks();
    private final AtomicLong tensorsReceived = new AtomicLong();
    private final Sweeper sweeper;
    /**
     * Writers hold the read side from creating a file until it is registered as owned; close takes the
     * write side, so a file created while another thread closes (a shutdown hook, say) is always unlinked.
     */
    private final ReentrantReadWriteLock closing = new ReentrantReadWriteLock();
    private volatile boolean closed;

    /** A spill file in flight: its owned file and when it was written. */
    private record InFlight(OwnedFile file, long sentAtNs) {
    }

    /** A file transport of a new owner, sweeping its directory every {@link TransportConfig#RECLAIM_INTERVAL_DEFAULT}. */
    public FileTransport(Path dir, Namespace namespace, String entity) {
        this(Owner.create(dir, namespace, entity), TransportConfig.RECLAIM_INTERVAL_DEFAULT);
    }

    /**
     * @param owner           whose spill files these are (an arena transport passes its own)
     * @param reclaimInterval how often this process sweeps dead owners' files ({@link Sweeper})
     */
    public FileTransport(Owner owner, Duration reclaimInterval) {
        this.owner = owner;
        this.dir = owner.dir();
        this.entity = owner.entity();
        this.sweeper = Sweeper.join(dir, reclaimInterval);
        ShutdownCleanup.register(this);
    }

    /** A random uuid for a tensor; ThreadLocalRandom avoids SecureRandom's cost and lock on the hot path. */
    public static UUID newUuid() {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        return new UUID(r.nextLong(), r.nextLong());
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors) {
        checkOpen();
        List<TensorDescriptor> sent = new ArrayList<>(tensors.size());
        boolean ok = false;
        try {
            for (Tensor tensor : tensors) {
                sent.add(write(requestId, tensor, newUuid()));
            }
            ok = true;
            return sent;
        } finally {
            if (!ok) {
                sent.forEach(d -> release(d.uuid()));
            }
        }
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors, List<String> consumers) {
        return fanOut.send(consumers, () -> send(requestId, tensors));
    }

    /**
     * Writes one tensor to a file of its own and records it as owned until {@link #release}.
     *
     * @throws CapacityException when the file system cannot hold it
     */
    public TensorDescriptor write(String requestId, Tensor tensor, UUID uuid) {
        String name = owner.spillName(uuid);
        long nbytes = tensor.nbytes();
        closing.readLock().lock();
        try {
            checkOpen();
            owned.put(uuid, new InFlight(createAndFill(name, tensor), System.nanoTime()));
        } finally {
            closing.readLock().unlock();
        }
        tensorsSent.incrementAndGet();
        bytesSent.addAndGet(nbytes);
        return new TensorDescriptor(uuid, requestId, entity, tensor.dtype(), tensor.shape(), nbytes,
            Placement.SPILL, name, 0);
    }

    private OwnedFile createAndFill(String name, Tensor tensor) {
        long nbytes = tensor.nbytes();
        OwnedFile file = OwnedFile.create(dir, name);
        boolean ok = false;
        try {
            if (nbytes > 0) {
                try (MappedSegment mapping = MappedSegment.mapConfined(name, file, nbytes)) {
                    MemorySegment.copy(tensor.data(), 0, mapping.memory(), 0, nbytes);
                }
            }
            ok = true;
            return file;
        } catch (ShmFullException e) {
            throw new CapacityException("no room for a spill file: dir=" + dir + ", nbytes=" + nbytes
                + ": free shared memory (the doctor command lists what holds it) or give it a larger size", e);
        } finally {
            if (!ok) {
                file.close();
            }
        }
    }

    @Override
    public ReceivedTensor receive(TensorDescriptor d) {
        checkOpen();
        if (d.placement() != Placement.SPILL) {
            throw new IllegalArgumentException("the file transport reads spill files only: uuid=" + d.uuid()
                + ", placement=" + d.placement());
        }
        tensorsReceived.incrementAndGet();
        if (d.nbytes() == 0) {
            return MappedView.empty(d);
        }
        if (d.nbytes() > COPY_OUT_MAX_BYTES) {
            MappedSegment file = MappedSegment.openPeer(dir, d.fileName(), d.nbytes());
            return new MappedView(d, file.memory().asSlice(0, d.nbytes()), file::unmap);
        }
        // Read into the heap: the file's mapping is this thread's and unmapped at once (closing a shared
        // mapping synchronizes with every thread, which costs more than the copy), and the view is free
        // to move between threads.
        try (MappedSegment file = MappedSegment.openPeer(dir, d.fileName(), d.nbytes(), false, true)) {
            MemorySegment copy = MemorySegment.ofArray(new byte[(int) d.nbytes()]);
            MemorySegment.copy(file.memory(), 0, copy, 0, d.nbytes());
            return new MappedView(d, copy.asReadOnly(), () -> { });
        }
    }

    @Override
    public void ack(String consumer, Collection<UUID> uuids) {
        for (UUID uuid : uuids) {
            FanOutAcks.Outcome outcome = fanOut.isEmpty() ? FanOutAcks.Outcome.UNKNOWN : fanOut.ack(uuid, consumer);
            if (outcome == FanOutAcks.Outcome.REPEATED || outcome == FanOutAcks.Outcome.NOT_NAMED) {
                ignoredAcks.incrementAndGet();
            } else if (outcome != FanOutAcks.Outcome.PENDING) {
                ackOne(uuid);
            }
        }
    }

    @Override
    public void ack(Collection<UUID> uuids) {
        for (UUID uuid : uuids) {
            if (!fanOut.isEmpty() && fanOut.contains(uuid)) {
                ignoredAcks.incrementAndGet(); // a fan-out tensor needs to know which consumer ACKed
            } else {
                ackOne(uuid);
            }
        }
    }

    private void ackOne(UUID uuid) {
        if (release(uuid)) {
            acks.incrementAndGet();
        } else {
            unknownAcks.incrementAndGet();
            LOG.debug("ACK of a tensor not in flight, ignored: uuid={}", uuid);
        }
    }

    /** Removes the file of an owned tensor; false when the uuid is not one of ours in flight. */
    public boolean release(UUID uuid) {
        fanOut.remove(uuid);
        InFlight f = owned.remove(uuid);
        if (f == null) {
            return false;
        }
        f.file().close();
        return true;
    }

    /** Removes the files written before {@code cutoffNs} (their ACK is overdue); returns their uuids. */
    public List<UUID> releaseOlderThan(long cutoffNs) {
        List<UUID> expired = new ArrayList<>();
        for (Map.Entry<UUID, InFlight> e : owned.entrySet()) {
            if (e.getValue().sentAtNs() - cutoffNs < 0 && release(e.getKey())) {
                expired.add(e.getKey());
            }
        }
        return expired;
    }

    /** Whether this tensor was written here and not yet released. */
    public boolean isInFlight(UUID uuid) {
        return owned.containsKey(uuid);
    }

    /** Tensors written and not yet released. */
    public int inFlight() {
        return owned.size();
    }

    @Override
    public TransportStats statsSummary() {
        return new TransportStats("file", null, tensorsSent.get(), bytesSent.get(), owned.size(), 0, 0, 0, 0,
            acks.get(), unknownAcks.get(), ignoredAcks.get(), fanOut.partiallyAcked(), 0, 0, tensorsReceived.get(), 0, 0, 0, "not used by the file transport");
    }

    @Override
    public void unlinkOwnedFiles() {
        // Entries (and locks) stay, so that later ACKs of these tensors are still recognized.
        owned.values().forEach(f -> f.file().unlink());
    }

    @Override
    public void close() {
        closing.writeLock().lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            ShutdownCleanup.unregister(this);
            try {
                owned.values().forEach(f -> f.file().close());
                owned.clear();
            } finally {
                sweeper.leave();
            }
        } finally {
            closing.writeLock().unlock();
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("file transport is closed: entity=" + entity);
        }
    }
}
