package io.mstar.transport.posix;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.exceptions.SegmentAccessException;

import static io.mstar.transport.posix.Posix.O_CLOEXEC;
import static io.mstar.transport.posix.Posix.O_NOFOLLOW;
import static io.mstar.transport.posix.Posix.O_NONBLOCK;
import static io.mstar.transport.posix.Posix.O_RDONLY;
import static io.mstar.transport.posix.Posix.O_RDWR;

/**
 * An open descriptor of a file at one of our names, and what {@code fstat} said of it: the one way the
 * library opens a name in the shared-memory directory that someone else may have put there (a peer's
 * segment or mailbox, a liveness probe, a stats file).
 */
public record OurFile(int fd, Posix.FileStatus status) {
    /**
     * Opens {@code path} and believes it only when {@code fstat} says it is a regular file of our uid. The
     * open never follows a link ({@code O_NOFOLLOW}), never waits ({@code O_NONBLOCK}: a FIFO planted at the
     * name would otherwise block {@code open} until a writer came) and is not inherited ({@code O_CLOEXEC}).
     * On a failed check the descriptor is closed before the exception goes up.
     *
     * @throws NativeCallException    when the open fails ({@code ENOENT}, {@code ELOOP} for a link, ...)
     * @throws SegmentAccessException when the file is not a regular file or belongs to another user
     */
    public static OurFile open(String path, boolean writable) {
        int fd = Posix.open(path, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
        boolean ok = false;
        try {
            Posix.FileStatus status = Posix.fstat(fd, path);
            if (!status.isRegularFile()) {
                throw new SegmentAccessException("not a regular file at one of our names (mode "
                    + Integer.toOctalString(status.mode()) + "), refusing to use it: path=" + path);
            }
            int uid = Posix.geteuid();
            if (status.uid() != uid) {
                throw new SegmentAccessException("file at one of our names belongs to another user, refusing to use"
                    + " it: path=" + path + ", ownerUid=" + status.uid() + ", ourUid=" + uid);
            }
            ok = true;
            return new OurFile(fd, status);
        } finally {
            if (!ok) {
                Posix.close(fd, path);
            }
        }
    }
}
