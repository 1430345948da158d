package io.mstar.transport.spill;

import io.mstar.transport.DType;
import io.mstar.transport.Placement;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.CapacityException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappedView;
import io.mstar.transport.shm.ShmFullException;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One file per tensor in the shared-memory directory, named
 * {@code mstar_<ns>_spill_<entity>_<nonce>_<uuid>}: created exclusively (never following or reusing an
 * existing name), mode 0600, committed before it is written (a full tmpfs fails here, not as SIGBUS),
 * and locked by its owner until it is removed ({@link OwnedFile}: one descriptor per file in flight).
 * A consumer reads it (up to 1 GiB into the heap, larger files mapped read-only for the view's
 * lifetime); the producer removes it on {@link #release}, and all of its files on {@link #close()}.
 *
 * <p>The file transport keeps every tensor here; the arena transport its spills. Thread-safe.
 */
public final class SpillStore implements AutoCloseable {
    /** Spill files up to this size are read into the heap; larger ones are mapped for the view's lifetime. */
    static final long COPY_OUT_MAX_BYTES = 1L << 30;

    private final Owner owner;
    private final Map<UUID, InFlight> owned = new ConcurrentHashMap<>();
    /**
     * Writers hold the read side from creating a file until it is registered as owned; close takes the
     * write side, so a file created while another thread closes (a shutdown hook, say) is always removed.
     */
    private final ReentrantReadWriteLock writing = new ReentrantReadWriteLock();
    private final CloseOnce closer = new CloseOnce();

    /** A spill file in flight: its owned file and when it was written. */
    private record InFlight(OwnedFile file, long sentAtNs) {
    }

    /** A file claimed and not yet published: its mapping goes with it when the store closes. */
    private record Claimed(OwnedFile file, MappedSegment mapping) {
    }

    private final Map<UUID, Claimed> claimed = new ConcurrentHashMap<>();

    /** @param owner whose spill files these are */
    public SpillStore(Owner owner) {
        this.owner = owner;
    }

    /**
     * Writes one tensor to a file of its own and records it as owned until {@link #release}.
     *
     * @throws CapacityException     when the file system cannot hold it
     * @throws IllegalStateException when the store is closed
     */
    public TensorDescriptor write(String requestId, Tensor tensor, UUID uuid) {
        String name = owner.spillName(uuid);
        writing.readLock().lock();
        try {
            if (closer.isClosed()) {
                throw new IllegalStateException("spill store is closed: entity=" + owner.entity());
            }
            owned.put(uuid, new InFlight(createAndFill(name, tensor), System.nanoTime()));
        } finally {
            writing.readLock().unlock();
        }
        return new TensorDescriptor(uuid, requestId, owner.entity(), tensor.dtype(), tensor.shape(), tensor.nbytes(),
            Placement.SPILL, name, 0);
    }

    /**
     * Claims a file of its own for one tensor, mapped writable, for the producer to write in place. It
     * counts in {@code counters} as sent, or spilled when {@code spill}, once published.
     *
     * @throws CapacityException     when the file system cannot hold it
     * @throws IllegalStateException when the store is closed
     */
    public FileClaim claim(String requestId, DType dtype, long[] shape, UUID uuid, TransportCounters counters,
                           boolean spill) {
        long nbytes = Tensor.byteSize(dtype, shape);
        String name = owner.spillName(uuid);
        TensorDescriptor d = new TensorDescriptor(uuid, requestId, owner.entity(), dtype, shape, nbytes,
            Placement.SPILL, name, 0);
        writing.readLock().lock();
        try {
            if (closer.isClosed()) {
                throw new IllegalStateException("spill store is closed: entity=" + owner.entity());
            }
            OwnedFile file = OwnedFile.create(owner.dir(), name);
            MappedSegment mapping = null;
            try {
                mapping = nbytes == 0 ? null : MappedSegment.mapShared(name, file, nbytes);
            } catch (ShmFullException e) {
                file.close();
                throw noRoom(nbytes, e);
            }
            claimed.put(uuid, new Claimed(file, mapping));
            return new FileClaim(this, counters, spill, d, mapping);
        } finally {
            writing.readLock().unlock();
        }
    }

    /** A claimed file becomes a tensor in flight. */
    void publish(UUID uuid) {
        Claimed c = claimed.remove(uuid);
        if (c == null) {
            throw new IllegalStateException("claim is gone (its transport closed): uuid=" + uuid);
        }
        owned.put(uuid, new InFlight(c.file(), System.nanoTime()));
    }

    private CapacityException noRoom(long nbytes, ShmFullException e) {
        return new CapacityException("no room for a spill file: dir=" + owner.dir() + ", nbytes=" + nbytes
            + ": free shared memory (the doctor command lists what holds it) or give it a larger size", e);
    }

    private OwnedFile createAndFill(String name, Tensor tensor) {
        long nbytes = tensor.nbytes();
        Path dir = owner.dir();
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
            throw noRoom(nbytes, e);
        } finally {
            if (!ok) {
                file.close();
            }
        }
    }

    /** Opens a spill file of any producer of the deployment for reading. */
    public MappedView read(TensorDescriptor d) {
        if (d.placement() != Placement.SPILL) {
            throw new IllegalArgumentException("not a spill file: uuid=" + d.uuid() + ", placement=" + d.placement());
        }
        if (d.nbytes() == 0) {
            return MappedView.empty(d);
        }
        if (d.nbytes() > COPY_OUT_MAX_BYTES) {
            MappedSegment file = MappedSegment.openPeer(owner.dir(), d.fileName(), d.nbytes());
            return new MappedView(d, file.memory().asSlice(0, d.nbytes()), file::unmap);
        }
        // Read into the heap: the file's mapping is this thread's and unmapped at once (closing a shared
        // mapping synchronizes with every thread, which costs more than the copy), and the view is free
        // to move between threads.
        try (MappedSegment file = MappedSegment.openPeer(owner.dir(), d.fileName(), d.nbytes(), false, true)) {
            MemorySegment copy = MemorySegment.ofArray(new byte[(int) d.nbytes()]);
            MemorySegment.copy(file.memory(), 0, copy, 0, d.nbytes());
            return new MappedView(d, copy.asReadOnly(), () -> { });
        }
    }

    /**
     * Removes the file of an owned tensor in flight; returns when it was written ({@link System#nanoTime}),
     * or {@link TransportCounters#NOT_IN_FLIGHT} when the uuid is not one of ours in flight.
     */
    public long release(UUID uuid) {
        InFlight f = owned.remove(uuid);
        if (f == null) {
            return TransportCounters.NOT_IN_FLIGHT;
        }
        f.file().close();
        return f.sentAtNs();
    }

    /** Removes the file of a claim that was not published. */
    void abort(UUID uuid) {
        Claimed c = claimed.remove(uuid);
        if (c != null) {
            c.file().close();
        }
    }

    /** Removes the files written before {@code cutoffNs} (their ACK is overdue); returns their uuids. */
    public List<UUID> releaseOlderThan(long cutoffNs) {
        List<UUID> expired = new ArrayList<>();
        for (Map.Entry<UUID, InFlight> e : owned.entrySet()) {
            if (e.getValue().sentAtNs() - cutoffNs < 0 && release(e.getKey()) != TransportCounters.NOT_IN_FLIGHT) {
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

    /** Unlinks every owned file; the entries (and locks) stay, so later ACKs of these tensors are still recognized. */
    public void unlinkAll() {
        owned.values().forEach(f -> f.file().unlink());
    }

    /** Removes every owned file; writing afterwards fails. Idempotent. */
    @Override
    public void close() {
        closer.close(() -> {
            writing.writeLock().lock(); // a write in progress registers its file first
            try {
                owned.values().forEach(f -> f.file().close());
                owned.clear();
                claimed.values().forEach(c -> {
                    if (c.mapping() != null) {
                        c.mapping().unmap(); // a write still in progress fails with an exception, never a crash
                    }
                    c.file().close();
                });
                claimed.clear();
            } finally {
                writing.writeLock().unlock();
            }
        });
    }
}
