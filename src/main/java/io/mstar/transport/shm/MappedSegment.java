package io.mstar.transport.shm;

import io.mstar.transport.NativeCallException;
import io.mstar.transport.SegmentAccessException;
import io.mstar.transport.posix.Posix;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.mstar.transport.posix.Posix.MAP_POPULATE;
import static io.mstar.transport.posix.Posix.MAP_SHARED;
import static io.mstar.transport.posix.Posix.O_CLOEXEC;
import static io.mstar.transport.posix.Posix.O_CREAT;
import static io.mstar.transport.posix.Posix.O_EXCL;
import static io.mstar.transport.posix.Posix.O_NOFOLLOW;
import static io.mstar.transport.posix.Posix.O_RDONLY;
import static io.mstar.transport.posix.Posix.O_RDWR;
import static io.mstar.transport.posix.Posix.PROT_READ;
import static io.mstar.transport.posix.Posix.PROT_WRITE;

/**
 * One shared-memory file mapped into this process: either our own segment (created, read-write,
 * unlinked on close) or a peer's (opened read-only, left in place on close).
 *
 * <p>The mapping is made once with {@code MAP_POPULATE}, so page faults are paid here and not on the
 * first copy, and it never moves: its address stays valid until {@link #close()}, which unmaps it
 * through its own shared {@link Arena}. Closing is idempotent.
 */
public final class MappedSegment implements AutoCloseable {
    /** Mode of every file we create: owner read and write only. */
    static final int FILE_MODE = 0600;

    private final String name;
    private final String path;
    private final long sizeBytes;
    private final boolean owned;
    private final Arena arena;
    private final MemorySegment memory;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final AtomicBoolean unlinked = new AtomicBoolean();

    private MappedSegment(String name, String path, long sizeBytes, boolean owned, Arena arena, MemorySegment memory) {
        this.name = name;
        this.path = path;
        this.sizeBytes = sizeBytes;
        this.owned = owned;
        this.arena = arena;
        this.memory = memory;
    }

    /**
     * Creates {@code dir/name} exclusively (never following or reusing an existing file), commits its
     * pages and maps it read-write.
     *
     * @throws ShmFullException when the file system cannot back {@code sizeBytes}
     * @throws NativeCallException when any other libc call fails, e.g. {@code EEXIST} for a name in use
     */
    public static MappedSegment create(Path dir, String name, long sizeBytes) {
        return create(dir, name, sizeBytes, true, false);
    }

    /**
     * As {@link #create(Path, String, long)}, mapped for the calling thread only: unmapping a thread's own
     * mapping is cheap, where closing a shared one synchronizes with every thread (a spill file is
     * written by one thread and unmapped at once).
     */
    public static MappedSegment createConfined(Path dir, String name, long sizeBytes) {
        return create(dir, name, sizeBytes, true, true);
    }

    /** As {@link #create(Path, String, long)}; tests skip the free-space check to reach the commit's own guard. */
    static MappedSegment create(Path dir, String name, long sizeBytes, boolean checkSpaceFirst, boolean confined) {
        String path = dir.resolve(name).toString();
        if (checkSpaceFirst) {
            long available = Posix.statvfs(dir.toString()).availableBytes();
            if (available < sizeBytes) {
                throw new ShmFullException("shared-memory directory cannot back a new segment: dir=" + dir
                    + ", segmentBytes=" + sizeBytes + ", availableBytes=" + available, null);
            }
        }
        int fd = Posix.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FILE_MODE);
        boolean ok = false;
        try {
            try {
                Posix.fallocate(fd, sizeBytes, path);
            } catch (NativeCallException e) {
                if (e.errno() == Posix.ENOSPC) {
                    throw new ShmFullException("shared-memory directory filled while committing a segment: path="
                        + path + ", segmentBytes=" + sizeBytes, e);
                }
                throw e;
            }
            MappedSegment segment = map(name, path, fd, sizeBytes, PROT_READ | PROT_WRITE, true, confined);
            ok = true;
            return segment;
        } finally {
            Posix.close(fd, path);
            if (!ok) {
                Posix.unlink(path);
            }
        }
    }

    /** Creates an empty file exclusively, with the same flags and mode as a segment (a zero-byte tensor's file). */
    public static void createEmpty(Path dir, String name) {
        String path = dir.resolve(name).toString();
        Posix.close(Posix.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FILE_MODE), path);
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
        int fd;
        try {
            fd = Posix.open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (NativeCallException e) {
            throw new SegmentAccessException("peer segment cannot be opened: path=" + path + ", " + e.getMessage(), e);
        }
        try {
            Posix.FileStatus status = Posix.fstat(fd, path);
            if (!status.isRegularFile()) {
                throw new SegmentAccessException("peer segment is not a regular file: path=" + path
                    + ", mode=" + Integer.toOctalString(status.mode()));
            }
            int uid = Posix.geteuid();
            if (status.uid() != uid) {
                throw new SegmentAccessException("peer segment belongs to another user: path=" + path
                    + ", ownerUid=" + status.uid() + ", ourUid=" + uid);
            }
            if (status.sizeBytes() < minSizeBytes || status.sizeBytes() == 0) {
                throw new SegmentAccessException("peer segment is smaller than needed: path=" + path
                    + ", sizeBytes=" + status.sizeBytes() + ", neededBytes=" + minSizeBytes);
            }
            return map(name, path, fd, status.sizeBytes(), writable ? PROT_READ | PROT_WRITE : PROT_READ, false, confined);
        } finally {
            Posix.close(fd, path);
        }
    }

    private static MappedSegment map(String name, String path, int fd, long sizeBytes, int prot, boolean owned,
                                     boolean confined) {
        long address = Posix.mmap(sizeBytes, prot, MAP_SHARED | MAP_POPULATE, fd, path);
        Arena arena = confined ? Arena.ofConfined() : Arena.ofShared();
        MemorySegment memory = MemorySegment.ofAddress(address)
            .reinterpret(sizeBytes, arena, unused -> Posix.munmap(address, sizeBytes, path));
        return new MappedSegment(name, path, sizeBytes, owned, arena,
            (prot & PROT_WRITE) != 0 ? memory : memory.asReadOnly());
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

    public boolean isClosed() {
        return closed.get();
    }

    /** Removes our file's name; mappings (ours and peers') stay valid until unmapped. Idempotent. */
    public void unlink() {
        if (owned && unlinked.compareAndSet(false, true)) {
            Posix.unlink(path);
        }
    }

    /** Unmaps, leaving the file in place (a spill file handed to its consumer). Idempotent. */
    public void unmap() {
        if (closed.compareAndSet(false, true)) {
            arena.close();
        }
    }

    /** Unlinks (own segments) and unmaps. Idempotent. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            try {
                unlink();
            } finally {
                arena.close();
            }
        }
    }
}
