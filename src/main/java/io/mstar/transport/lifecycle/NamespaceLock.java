package io.mstar.transport.lifecycle;

import io.mstar.transport.NativeCallException;
import io.mstar.transport.posix.Posix;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import static io.mstar.transport.posix.Posix.O_CLOEXEC;
import static io.mstar.transport.posix.Posix.O_CREAT;
import static io.mstar.transport.posix.Posix.O_NOFOLLOW;
import static io.mstar.transport.posix.Posix.O_RDWR;

/**
 * This process's shared {@code flock} on its deployment's lock file {@code mstar_<ns>.lock}, held from
 * before the first file of the namespace is created until after the last one is removed. One hold per
 * (directory, namespace) and process, counted over its users (transports, mailboxes).
 *
 * <p>A namespace whose lock can be taken exclusively has no live process, whatever its PIDs were: that
 * is how {@link Reclaimer} tells dead deployments, without PIDs, heartbeats or file ages. Both sides
 * check after locking that the locked file is still the one at the path (a reclaimer may have unlinked
 * it meanwhile) and retry otherwise, which makes start and reclaim race-free.
 *
 * <p>The first hold in a directory first reclaims the dead namespaces there (files a SIGKILL left).
 */
public final class NamespaceLock implements AutoCloseable {
    private static final Map<String, NamespaceLock> HELD = new HashMap<>();
    private static final Set<Path> SWEPT = new HashSet<>();

    private final Path dir;
    private final Namespace namespace;
    private final int fd;
    private int holders;

    private NamespaceLock(Path dir, Namespace namespace, int fd) {
        this.dir = dir;
        this.namespace = namespace;
        this.fd = fd;
    }

    /** The name of a namespace's lock file. */
    public static String fileName(Namespace namespace) {
        return "mstar_" + namespace.id() + ".lock";
    }

    /** Takes (or joins) this process's shared hold on the namespace in {@code dir}. */
    public static NamespaceLock acquire(Path dir, Namespace namespace) {
        synchronized (NamespaceLock.class) {
            if (SWEPT.add(dir.toAbsolutePath().normalize())) {
                Reclaimer.reclaimDead(dir);
            }
            String key = dir.toAbsolutePath().normalize() + "|" + namespace.id();
            NamespaceLock lock = HELD.get(key);
            if (lock == null) {
                lock = new NamespaceLock(dir, namespace, lockShared(dir, namespace));
                HELD.put(key, lock);
            }
            lock.holders++;
            return lock;
        }
    }

    private static int lockShared(Path dir, Namespace namespace) {
        String path = dir.resolve(fileName(namespace)).toString();
        while (true) {
            int fd = Posix.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
            boolean ok = false;
            try {
                Posix.flock(fd, Posix.LOCK_SH, path); // waits while a reclaimer holds it
                if (isStillAt(fd, path)) {
                    ok = true;
                    return fd;
                }
            } finally {
                if (!ok) {
                    Posix.close(fd, path);
                }
            }
        }
    }

    /** Whether the open file {@code fd} is the file now at {@code path} (not one unlinked since). */
    static boolean isStillAt(int fd, String path) {
        long inode = Posix.fstat(fd, path).inode();
        int now;
        try {
            now = Posix.open(path, Posix.O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (NativeCallException e) {
            return false;
        }
        try {
            return Posix.fstat(now, path).inode() == inode;
        } finally {
            Posix.close(now, path);
        }
    }

    /**
     * Leaves the hold. The last holder in this process releases the lock; when no other process holds it
     * either, the lock file is removed too, so an orderly stop leaves nothing behind.
     */
    @Override
    public void close() {
        synchronized (NamespaceLock.class) {
            if (--holders > 0) {
                return;
            }
            HELD.remove(dir.toAbsolutePath().normalize() + "|" + namespace.id());
            String path = dir.resolve(fileName(namespace)).toString();
            try {
                // Converting to exclusive succeeds only when no other process holds the lock.
                if (Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path) && isStillAt(fd, path)) {
                    Posix.unlink(path);
                }
            } finally {
                Posix.close(fd, path);
            }
        }
    }
}
