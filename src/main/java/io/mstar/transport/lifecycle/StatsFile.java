package io.mstar.transport.lifecycle;

import io.mstar.transport.posix.Posix;

import java.nio.charset.StandardCharsets;

/**
 * {@code mstar_<ns>_stats_<entity>_<nonce>}: one {@code key=value} line, the latest stats snapshot of a
 * live transport, rewritten at each stats interval (when stats logging is on) so that
 * {@code mstar-shm stats} can read it from another process. Each snapshot is written to
 * {@code <name>.next} and renamed over the name, so readers never see half a line; both are
 * {@link OwnedFile}s of the transport's owner, so a sweep leaves them while it lives. Removed on close.
 */
public final class StatsFile implements AutoCloseable {
    private final Owner owner;
    private OwnedFile current; // guarded by this
    private final CloseOnce closer = new CloseOnce();

    public StatsFile(Owner owner) {
        this.owner = owner;
    }

    /** Publishes one snapshot line. */
    public synchronized void write(String line) {
        if (closer.isClosed()) {
            return;
        }
        OwnedFile next = OwnedFile.create(owner.dir(), owner.statsName() + ".next");
        try {
            Posix.pwrite(next.fd(), (line + "\n").getBytes(StandardCharsets.UTF_8), 0, next.path());
            next.renameTo(owner.dir(), owner.statsName());
        } catch (RuntimeException e) {
            next.close();
            throw e;
        }
        if (current != null) {
            current.close(); // its name is the new snapshot's now, so this only drops the old inode's lock
        }
        current = next;
    }

    /** Removes the file. Idempotent. */
    @Override
    public void close() {
        closer.close(this::remove);
    }

    private synchronized void remove() {
        if (current != null) {
            current.close();
            current = null;
        }
    }
}
