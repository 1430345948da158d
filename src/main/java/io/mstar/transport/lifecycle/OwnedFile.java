package io.mstar.transport.lifecycle;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.posix.Posix;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static io.mstar.transport.posix.Posix.O_CLOEXEC;
import static io.mstar.transport.posix.Posix.O_CREAT;
import static io.mstar.transport.posix.Posix.O_EXCL;
import static io.mstar.transport.posix.Posix.O_NOFOLLOW;
import static io.mstar.transport.posix.Posix.O_RDWR;

/**
 * A file in the shared-memory directory that is its own liveness lock: created exclusively (mode 0600,
 * never following or reusing a name), then locked with {@code flock(LOCK_EX)} through a descriptor its
 * owner keeps open until the file is removed. The kernel drops the lock when the owner's process dies,
 * however it dies, and only then can a {@link Reclaimer} take it: no PIDs, heartbeats or file ages.
 *
 * <p>Every owned file (not a directory) is registered with {@link ShutdownCleanup} from its making to its
 * close, so a SIGTERM or SIGINT at any instant removes it, whatever holds it. A directory holds other
 * owners' files, which must go first: whoever holds it closes it (the demo's own hook, the cross-node link).
 *
 * <p>Creation is race-free against a concurrent sweep: a sweep may lock and unlink the new file between
 * its creation and our lock, so after locking we check that the inode at the path is still ours, and
 * create it again otherwise. A sweep that locks a file first and then finds it still at its path can
 * only be looking at a file nobody holds.
 */
public final class OwnedFile implements AutoCloseable {
    /** Mode of every file the library creates: owner read and write only. */
    public static final int FILE_MODE = 0600;

    private volatile String path;
    private final int fd;
    private final boolean directory;
    private final CloseOnce closer = new CloseOnce();

    private OwnedFile(String path, int fd, boolean directory) {
        this.path = path;
        this.fd = fd;
        this.directory = directory;
    }

    /**
     * Creates {@code dir/name} and locks it.
     *
     * @throws NativeCallException {@code EEXIST} when any file (or link) is already at the name
     */
    public static OwnedFile create(Path dir, String name) {
        return ShutdownCleanup.registerNew(() -> createLocked(dir, name));
    }

    private static OwnedFile createLocked(Path dir, String name) {
        String path = dir.resolve(name).toString();
        while (true) {
            OwnedFile file = lockIfStillAt(Posix.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, FILE_MODE),
                path, false);
            if (file != null) {
                return file;
            }
            // A sweep removed the file before we locked it: its name is free again.
        }
    }

    /**
     * Creates the directory {@code dir/name} and locks it the same way (a working directory whose files
     * belong to other owners, such as the demo's); closing removes it if it is empty by then.
     */
    public static OwnedFile createDirectory(Path dir, String name) {
        Path directory = dir.resolve(name);
        String path = directory.toString();
        while (true) {
            try {
                Files.createDirectory(directory, PosixFilePermissions.asFileAttribute(
                    PosixFilePermissions.fromString("rwx------")));
            } catch (IOException e) {
                throw new UncheckedIOException("cannot create " + directory, e);
            }
            OwnedFile file = lockIfStillAt(Posix.open(path, Posix.O_RDONLY | Posix.O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0),
                path, true);
            if (file != null) {
                return file;
            }
        }
    }

    // Locks the file just created; null (descriptor closed) when a sweep removed it before the lock. When the
    // lock or the check fails (EMFILE, EINTR...), the file we made is removed, if still ours, before the error
    // goes up: otherwise it would stay at its name with no owner to remove it.
    private static OwnedFile lockIfStillAt(int fd, String path, boolean directory) {
        boolean stillAt;
        try {
            Posix.flock(fd, Posix.LOCK_EX, path); // at most waits out a sweep's brief probe of the new file
            stillAt = isStillAt(fd, path);
        } catch (RuntimeException | Error e) {
            try {
                if (isStillAt(fd, path)) {
                    removeName(path, directory);
                }
            } finally {
                Posix.close(fd, path);
            }
            throw e;
        }
        if (!stillAt) {
            Posix.close(fd, path);
            return null;
        }
        return new OwnedFile(path, fd, directory);
    }

    private static void removeName(String path, boolean directory) {
        try {
            if (directory) {
                Files.deleteIfExists(Path.of(path));
            } else {
                Posix.unlink(path);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove " + path, e);
        }
    }

    /**
     * Whether the open file {@code fd} is the file now at {@code path} (not one unlinked or replaced since).
     * Compares inodes by {@code lstat}, which needs no second descriptor: under {@code EMFILE} a second open
     * would fail and make our own new file look removed.
     */
    static boolean isStillAt(int fd, String path) {
        Posix.FileStatus now = Posix.lstat(path);
        return now != null && now.inode() == Posix.fstat(fd, path).inode();
    }

    /** The descriptor that holds the lock; valid until {@link #close()}. */
    public int fd() {
        return fd;
    }

    public String path() {
        return path;
    }

    /** Gives the file a new name, atomically replacing what was there; the lock stays, on the same inode. */
    public void renameTo(Path dir, String name) {
        String target = dir.resolve(name).toString();
        Posix.rename(path, target);
        path = target;
    }

    /** Removes the file's name if it is still ours, keeping the descriptor and its lock (peers keep their mappings). */
    public void unlink() {
        if (!closer.isClosed() && !directory && isStillAt(fd, path)) {
            Posix.unlink(path);
        }
    }

    /**
     * Removes the file's name if it is still ours (a file put there by hand is left alone), then closes the
     * descriptor, which drops the lock. Idempotent.
     */
    @Override
    public void close() {
        closer.close(this::remove);
    }

    private void remove() {
        ShutdownCleanup.unregister(this);
        try {
            if (directory || isStillAt(fd, path)) {
                removeName(path, directory);
            }
        } finally {
            Posix.close(fd, path);
        }
    }
}
