package io.mstar.transport.shm;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.posix.OurFile;
import io.mstar.transport.posix.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

import static io.mstar.transport.posix.Posix.MAP_POPULATE;
import static io.mstar.transport.posix.Posix.MAP_SHARED;
import static io.mstar.transport.posix.Posix.PROT_READ;
import static io.mstar.transport.posix.Posix.PROT_WRITE;

/**
 * One shared-memory file mapped into this process: either our own segment (created, locked as an
 * {@link OwnedFile}, read-write, unlinked on close) or a peer's (opened without a lock, read-only, left in
 * place on close).
 *
 * <p>The mapping is made once with {@code MAP_POPULATE}, so page faults are paid here and not on the
 * first copy, and it never moves: its address stays valid until {@link #close()}, which unmaps it
 * through its own shared {@link Arena}. Closing is idempotent.
 *
 * <p>Native code that reads or writes the mapping through a raw address (ONNX Runtime, say) is
 * invisible to the {@code Arena}: it holds the mapping with {@link NativeUse}, and a close while it does
 * unlinks the file at once but leaves the unmapping to the last native user's release. A native use asked
 * for after the close is refused.
 */
public final class MappedSegment implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(MappedSegment.class);
    private final String name;
    private final String path;
    private final long sizeBytes;
    private final OwnedFile owned; // null for a peer's file
    private final Arena arena;
    private final MemorySegment memory;
    private final CloseOnce closer = new CloseOnce();
    private static final int SLICE_CACHE_BITS = 12;
    private volatile MemorySegment[] slices; // made by the first slice(): most mappings (peers', spill files) never slice
    // Native users in the low bits, and CLOSED once closed: whoever brings it to exactly CLOSED unmaps.
    private final AtomicLong nativeUsers = new AtomicLong();
    private static final long CLOSED = 1L << 62;
    // Shared mappings by address, for NativeUse to find the one under a slice (confined ones cannot race a close).
    private static final ConcurrentSkipListMap<Long, MappedSegment> SHARED = new ConcurrentSkipListMap<>();
    private final boolean shared;

    private MappedSegment(String name, String path, long sizeBytes, OwnedFile owned, Arena arena, MemorySegment memory,
                          boolean shared) {
        this.name = name;
        this.path = path;
        this.sizeBytes = sizeBytes;
        this.owned = owned;
        this.arena = arena;
        this.memory = memory;
        this.shared = shared;
        if (shared) {
            SHARED.put(memory.address(), this);
        }
    }

    /** The shared mapping that holds {@code [address, address + bytes)}, or null when none of ours does. */
    static MappedSegment sharedMappingOf(long address, long bytes) {
        Map.Entry<Long, MappedSegment> e = SHARED.floorEntry(address);
        if (e == null || address + bytes > e.getKey() + e.getValue().sizeBytes) {
            return null;
        }
        return e.getValue();
    }

    /** Holds the mapping for native code; false once it is closed. */
    boolean beginNativeUse() {
        while (true) {
            long users = nativeUsers.get();
            if ((users & CLOSED) != 0) {
                return false;
            }
            if (nativeUsers.compareAndSet(users, users + 1)) {
                return true;
            }
        }
    }

    /** Releases a hold; the last one out after a close unmaps. */
    void endNativeUse() {
        if (nativeUsers.decrementAndGet() == CLOSED) {
            unmapNow();
        }
    }

    // At the close: unmaps now, or leaves it to the last native user.
    private void retire() {
        if (nativeUsers.getAndAdd(CLOSED) == 0) {
            unmapNow();
        } else {
            LOG.debug("unmapping deferred until native code stops using the mapping: path={}", path);
        }
    }

    private void unmapNow() {
        if (shared) {
            SHARED.remove(memory.address(), this);
        }
        arena.close();
    }

    /**
     * Creates {@code dir/name} exclusively (never following or reusing an existing file), locks it as its
     * owner, commits its pages and maps it read-write. Closing the segment removes the file.
     *
     * @throws ShmFullException when the file system cannot back {@code sizeBytes}
     * @throws NativeCallException when any other libc call fails, e.g. {@code EEXIST} for a name in use
     */
    public static MappedSegment create(Path dir, String name, long sizeBytes) {
        return create(dir, name, sizeBytes, true);
    }

    /** As {@link #create(Path, String, long)}; tests skip the free-space check to reach the commit's own guard. */
    static MappedSegment create(Path dir, String name, long sizeBytes, boolean checkSpaceFirst) {
        if (checkSpaceFirst) {
            long available = Posix.statvfs(dir.toString()).availableBytes();
            if (available < sizeBytes) {
                throw new ShmFullException("shared-memory directory cannot back a new segment: dir=" + dir
                    + ", segmentBytes=" + sizeBytes + ", availableBytes=" + available, null);
            }
        }
        OwnedFile file = OwnedFile.create(dir, name);
        boolean ok = false;
        try {
            MappedSegment segment = mapOwned(name, file, sizeBytes, false, true);
            ok = true;
            return segment;
        } finally {
            if (!ok) {
                file.close();
            }
        }
    }

    /**
     * Commits {@code sizeBytes} of an owned file and maps it read-write for the calling thread only (a spill
     * file, written by one thread and unmapped at once: unmapping a thread's own mapping is cheap, where
     * closing a shared one synchronizes with every thread). Closing the mapping leaves the file to its owner.
     *
     * @throws ShmFullException when the file system cannot back {@code sizeBytes}
     */
    public static MappedSegment mapConfined(String name, OwnedFile file, long sizeBytes) {
        return mapOwned(name, file, sizeBytes, true, false);
    }

    /**
     * Commits {@code sizeBytes} of an owned file and maps it read-write for any thread (a spill file claimed
     * for the producer to write in place). Closing the mapping leaves the file to its owner.
     *
     * @throws ShmFullException when the file system cannot back {@code sizeBytes}
     */
    public static MappedSegment mapShared(String name, OwnedFile file, long sizeBytes) {
        return mapOwned(name, file, sizeBytes, false, false);
    }

    private static MappedSegment mapOwned(String name, OwnedFile file, long sizeBytes, boolean confined,
                                          boolean removeOnClose) {
        try {
            Posix.fallocate(file.fd(), sizeBytes, file.path());
        } catch (NativeCallException e) {
            if (e.errno() == Posix.ENOSPC) {
                throw new ShmFullException("shared-memory directory filled while committing a segment: path="
                    + file.path() + ", segmentBytes=" + sizeBytes, e);
            }
            throw e;
        }
        return map(name, file.path(), file.fd(), sizeBytes, PROT_READ | PROT_WRITE, removeOnClose ? file : null, confined);
    }

    /**
     * Maps a peer's segment read-only after checking that it is a regular file of our uid and holds at
     * least {@code minSizeBytes}. Nothing is mapped when a check fails.
     *
     * @throws SegmentAccessException when the file is missing or fails a check
     */
    public static MappedSegment openPeer(Path dir, String name, long minSizeBytes) {
        return openPeer(dir, name, minSizeBytes, false);
    }

    /**
     * As {@link #openPeer(Path, String, long)}; {@code writable} maps it read-write (a peer's mailbox,
     * which every sender writes into).
     */
    public static MappedSegment openPeer(Path dir, String name, long minSizeBytes, boolean writable) {
        return openPeer(dir, name, minSizeBytes, writable, false);
    }

    /** As {@link #openPeer(Path, String, long, boolean)}; {@code confined} maps it for the calling thread only. */
    public static MappedSegment openPeer(Path dir, String name, long minSizeBytes, boolean writable, boolean confined) {
        String path = dir.resolve(name).toString();
        OurFile file;
        try {
            file = OurFile.open(path, writable);
        } catch (NativeCallException e) {
            throw new SegmentAccessException("peer segment cannot be opened: path=" + path + ", " + e.getMessage()
                + (e.errno() == Posix.ENOENT ? " (its producer stopped, or runs with another MSTAR_SHM_DIR: every"
                + " process of a deployment needs the same one)" : ""), e);
        }
        try {
            long size = file.status().sizeBytes();
            if (size < minSizeBytes || size == 0) {
                throw new SegmentAccessException("peer segment is smaller than needed: path=" + path
                    + ", sizeBytes=" + size + ", neededBytes=" + minSizeBytes);
            }
            return map(name, path, file.fd(), size, writable ? PROT_READ | PROT_WRITE : PROT_READ, null, confined);
        } finally {
            Posix.close(file.fd(), path);
        }
    }

    private static MappedSegment map(String name, String path, int fd, long sizeBytes, int prot, OwnedFile owned,
                                     boolean confined) {
        long address = Posix.mmap(sizeBytes, prot, MAP_SHARED | MAP_POPULATE, fd, path);
        Arena arena = confined ? Arena.ofConfined() : Arena.ofShared();
        MemorySegment memory = MemorySegment.ofAddress(address)
            .reinterpret(sizeBytes, arena, unused -> Posix.munmap(address, sizeBytes, path));
        return new MappedSegment(name, path, sizeBytes, owned, arena,
            (prot & PROT_WRITE) != 0 ? memory : memory.asReadOnly(), !confined);
    }

    public String name() {
        return name;
    }

    public String path() {
        return path;
    }

    public long sizeBytes() {
        return sizeBytes;
    }

    /** The whole mapping: read-write for our own segments, read-only for peers' unless opened writable. */
    public MemorySegment memory() {
        return memory;
    }

    /**
     * Exactly {@code [offset, offset + nbytes)} of the mapping. A range asked for again (a slot's, as the
     * allocator hands the same slots out in turn) gets the same object back from a small cache, so that a
     * claim allocates no segment in steady state. Thread-safe: segments are immutable, and an entry is checked
     * against the range before it is used, so a racing write only costs a new slice.
     */
    public MemorySegment slice(long offset, long nbytes) {
        MemorySegment[] cache = slices;
        if (cache == null) { // two racing threads may each make one: one is kept, the other's entries are lost
            cache = new MemorySegment[1 << SLICE_CACHE_BITS];
            slices = cache;
        }
        int i = (int) ((offset * 0x9E3779B97F4A7C15L) >>> (64 - SLICE_CACHE_BITS));
        MemorySegment cached = cache[i];
        if (cached != null && cached.address() == memory.address() + offset && cached.byteSize() == nbytes) {
            return cached;
        }
        MemorySegment fresh = memory.asSlice(offset, nbytes);
        cache[i] = fresh;
        return fresh;
    }

    public boolean isClosed() {
        return closer.isClosed();
    }

    /** Removes our file's name; mappings (ours and peers') stay valid until unmapped. Idempotent. */
    public void unlink() {
        if (owned != null) {
            owned.unlink();
        }
    }

    /** Unmaps, leaving the file in place (a peer's file, or a spill file handed to its consumer). Idempotent. */
    public void unmap() {
        closer.close(this::retire);
    }

    /** Unlinks and releases our own file, and unmaps. Idempotent. */
    @Override
    public void close() {
        closer.close(() -> {
            try {
                if (owned != null) {
                    owned.close();
                }
            } finally {
                retire();
            }
        });
    }
}
