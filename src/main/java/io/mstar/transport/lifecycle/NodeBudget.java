package io.mstar.transport.lifecycle;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.posix.RangeLocks;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * One shared-memory budget for every arena of a deployment in one directory ({@code MSTAR_SHM_NODE_MAX_MB}),
 * kept in a small accounting file that each arena joins: an arena commits a segment's bytes here before it
 * creates the segment and gives them back when it removes it, so that E workers together never commit more
 * than the budget. A worker that would pass it is told no, as at its own ceiling: it waits for its slots,
 * then spills.
 *
 * <pre>
 *   mstar_&lt;ns&gt;_budget                       (little-endian)
 *   0       u64 magic, written last by its creator      8  u64 budget bytes (the creator's)
 *   64 + 32 i: slot i   u64 owner (an arena's nonce, 0 free) | u64 committed bytes | pad to 32
 * </pre>
 * <ul>
 *   <li>Every arena that joined holds a shared {@code flock} on the file for its lifetime: the sweep removes a
 *       budget file only when no one holds it ({@link Reclaimer}), and the last arena out removes it.</li>
 *   <li>An arena holds an open-file-description lock on its slot's first byte for its lifetime; the kernel drops
 *       it when the process dies.</li>
 *   <li>Commits and releases are made under an OFD lock on byte 0 (held for a read and a write).</li>
 *   <li>A dead arena's slot (unlocked) still counts while any of its segments is in the directory: its share
 *       comes back once the sweep removed its files, and its slot is then free for another.</li>
 * </ul>
 */
public final class NodeBudget implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NodeBudget.class);
    private static final long MAGIC = 0x7465_6775_6272_736dL; // "msrbudge"
    static final int HEADER_BYTES = 64;
    static final int SLOT_BYTES = 32;
    /** Arenas that can join one budget at once. */
    static final int SLOTS = 1024;
    static final int FILE_BYTES = HEADER_BYTES + SLOTS * SLOT_BYTES;
    /** How long a commit waits for another arena's commit (one read and one write; a stopped process holds it). */
    static final long LOCK_WAIT_NS = 2_000_000_000L;
    /**
     * How long a joiner waits for the file's creator to write it (a few system calls, but a creator descheduled
     * on a busy node, eight JVMs starting on two cores, took longer than LOCK_WAIT_NS); only a creator that died
     * in between leaves it unwritten.
     */
    static final long READY_WAIT_NS = 30_000_000_000L;

    private final Path dir;
    private final String path;
    private final int fd;
    private final long budgetBytes;
    private final int slot;
    private final String ownerNonce;
    private long committed; // guarded by this: this arena's bytes in its slot
    private final CloseOnce closer = new CloseOnce();

    private NodeBudget(Path dir, String path, int fd, long budgetBytes, int slot, String ownerNonce) {
        this.dir = dir;
        this.path = path;
        this.fd = fd;
        this.budgetBytes = budgetBytes;
        this.slot = slot;
        this.ownerNonce = ownerNonce;
    }

    /**
     * Joins the deployment's budget in {@code dir}, making the file when it is the first; {@code ownerNonce} is the
     * arena's (its segments' names carry it).
     */
    public static NodeBudget join(Path dir, Namespace namespace, long budgetBytes, String ownerNonce) {
        String path = dir.resolve(ShmNames.budget(namespace)).toString();
        for (int attempt = 0; ; attempt++) {
            int fd = openOrCreate(path, budgetBytes);
            boolean ok = false;
            try {
                Posix.flock(fd, Posix.LOCK_SH, path); // a user: the sweep leaves it
                if (!OwnedFile.isStillAt(fd, path)) {
                    continue; // the last user removed it meanwhile: make or open the new one
                }
                long theirs = awaitReady(fd, path);
                if (theirs != budgetBytes) {
                    LOG.warn("the deployment's node budget file says another budget than this process's {}: path={},"
                        + " fileBudgetBytes={}, ourBudgetBytes={}: the file's holds for every arena; give every worker"
                        + " the same value", "MSTAR_SHM_NODE_MAX_MB", path, theirs, budgetBytes);
                }
                NodeBudget budget = new NodeBudget(dir, path, fd, theirs, takeSlot(dir, fd, path, ownerNonce), ownerNonce);
                ok = true;
                return budget;
            } finally {
                if (!ok) {
                    Posix.close(fd, path);
                }
                if (attempt > 100) {
                    throw new IllegalStateException("could not join the node budget file: " + path);
                }
            }
        }
    }

    private static int openOrCreate(String path, long budgetBytes) {
        int flags = Posix.O_RDWR | Posix.O_NOFOLLOW | Posix.O_CLOEXEC | Posix.O_NONBLOCK;
        while (true) {
            try {
                int fd = Posix.open(path, flags | Posix.O_CREAT | Posix.O_EXCL, 0600);
                Posix.fallocate(fd, FILE_BYTES, path);
                Posix.pwrite(fd, longs(budgetBytes), 8, path);
                Posix.pwrite(fd, longs(MAGIC), 0, path); // last: the file is ready
                return fd;
            } catch (NativeCallException e) {
                if (e.errno() != Posix.EEXIST) {
                    throw e;
                }
            }
            try {
                int fd = Posix.open(path, flags, 0);
                Posix.FileStatus status = Posix.fstat(fd, path);
                if (!status.isRegularFile() || status.uid() != Posix.geteuid()) {
                    Posix.close(fd, path);
                    throw new IllegalStateException("not this user's regular file at the node budget's name: " + path
                        + ": remove it, or give the deployment a directory of its own (MSTAR_SHM_DIR)");
                }
                return fd;
            } catch (NativeCallException e) {
                if (e.errno() != Posix.ENOENT) {
                    throw e; // else it went between the two opens: make it
                }
            }
        }
    }

    // The budget its creator wrote, once it wrote the magic (a moment after it made the file). A short read is a
    // file made and not yet sized: not ready either.
    private static long awaitReady(int fd, String path) {
        long deadline = System.nanoTime() + READY_WAIT_NS;
        while (true) {
            ByteBuffer header = read(fd, 0, 16, path);
            if (header.remaining() == 16 && header.getLong(0) == MAGIC) {
                return header.getLong(8);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the node budget file was never made ready: " + path
                    + " (its creator died while making it? remove it)");
            }
            LockSupport.parkNanos(1_000_000); // not a spin: the creator may need this core
        }
    }

    // A free slot (never used, or its owner dead with no segment left), locked and stamped with our nonce.
    private static int takeSlot(Path dir, int fd, String path, String ownerNonce) {
        lockHeader(fd, path);
        try {
            Set<String> withSegments = ownersWithSegments(dir);
            ByteBuffer slots = read(fd, HEADER_BYTES, SLOTS * SLOT_BYTES, path);
            for (int i = 0; i < SLOTS; i++) {
                long owner = slots.getLong(i * SLOT_BYTES);
                if ((owner == 0 || !withSegments.contains(nonce(owner))) && RangeLocks.tryLock(fd, slotOffset(i), 1, path)) {
                    ByteBuffer stamp = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
                    stamp.putLong(Long.parseUnsignedLong(ownerNonce, 16)).putLong(0);
                    Posix.pwrite(fd, stamp.array(), slotOffset(i), path);
                    return i;
                }
            }
        } finally {
            unlockHeader(fd, path);
        }
        throw new IllegalStateException("every slot of the node budget is taken: path=" + path + ", slots=" + SLOTS);
    }

    /**
     * Commits {@code bytes} more for this arena if every arena's together stays within the budget; returns
     * whether it did.
     */
    public synchronized boolean tryCommit(long bytes) {
        if (closer.isClosed()) {
            return false;
        }
        if (!tryLockHeader(fd, path)) {
            LOG.debug("the node budget's lock stayed taken (a stopped worker?): path={}", path);
            return false;
        }
        try {
            if (committedBytes(true) + bytes > budgetBytes) {
                return false;
            }
            committed += bytes;
            writeCommitted();
            return true;
        } finally {
            unlockHeader(fd, path);
        }
    }

    /** Gives {@code bytes} back (a segment this arena removed). */
    public synchronized void release(long bytes) {
        if (closer.isClosed()) {
            return;
        }
        lockHeader(fd, path);
        try {
            committed = Math.max(0, committed - bytes);
            writeCommitted();
        } finally {
            unlockHeader(fd, path);
        }
    }

    /** The budget's bytes. */
    public long budgetBytes() {
        return budgetBytes;
    }

    /** What every arena of the budget has committed, dead ones whose segments are still there included. */
    public long committedBytes() {
        return committedBytes(false);
    }

    private long committedBytes(boolean underLock) {
        Set<String> withSegments = null;
        ByteBuffer slots = read(fd, HEADER_BYTES, SLOTS * SLOT_BYTES, path);
        long total = 0;
        for (int i = 0; i < SLOTS; i++) {
            long owner = slots.getLong(i * SLOT_BYTES);
            long bytes = slots.getLong(i * SLOT_BYTES + 8);
            if (owner == 0 || bytes == 0) {
                continue;
            }
            if (i != slot && !RangeLocks.lockedByOther(fd, slotOffset(i), 1, path)) { // its owner died
                if (withSegments == null) {
                    withSegments = ownersWithSegments(dir);
                }
                if (!withSegments.contains(nonce(owner))) {
                    continue; // and the sweep removed its files: its share is back
                }
            }
            total += bytes;
        }
        return total;
    }

    private void writeCommitted() {
        ByteBuffer value = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(committed);
        Posix.pwrite(fd, value.array(), slotOffset(slot) + 8, path);
    }

    /** Leaves the budget: its slot is freed, and the last arena out removes the file. */
    @Override
    public void close() {
        closer.close(() -> {
            try {
                synchronized (this) {
                    Posix.pwrite(fd, new byte[16], slotOffset(slot), path);
                }
                if (Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path) && OwnedFile.isStillAt(fd, path)) {
                    Posix.unlink(path); // no other user: nothing is committed any more
                }
            } finally {
                Posix.close(fd, path);
            }
        });
    }

    // The owners (nonces) whose segments are in the directory now.
    private static Set<String> ownersWithSegments(Path dir) {
        Set<String> owners = new HashSet<>();
        for (String name : Reclaimer.ourNames(dir)) {
            ShmNames.Parsed parsed = ShmNames.parse(name);
            if (parsed != null && parsed.kind() == ShmNames.Kind.SEGMENT) {
                owners.add(parsed.owner());
            }
        }
        return owners;
    }

    private static String nonce(long owner) {
        return String.format("%08x", owner);
    }

    private static long slotOffset(int i) {
        return HEADER_BYTES + (long) i * SLOT_BYTES;
    }

    private static void lockHeader(int fd, String path) {
        if (!tryLockHeader(fd, path)) {
            throw new IllegalStateException("the node budget's lock stayed taken for " + LOCK_WAIT_NS / 1_000_000
                + " ms: path=" + path + " (a stopped worker holds it?)");
        }
    }

    private static boolean tryLockHeader(int fd, String path) {
        long deadline = System.nanoTime() + LOCK_WAIT_NS;
        while (!RangeLocks.tryLock(fd, 0, 1, path)) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            LockSupport.parkNanos(50_000);
        }
        return true;
    }

    private static void unlockHeader(int fd, String path) {
        RangeLocks.unlock(fd, 0, 1, path);
    }

    private static ByteBuffer read(int fd, long offset, int length, String path) {
        return ByteBuffer.wrap(Posix.pread(fd, length, offset, path)).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static byte[] longs(long value) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(value).array();
    }
}
