package io.mstar.transport.lifecycle;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.posix.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The shared-memory directory a process works in. By default it is a directory of the user's own under
 * {@code /dev/shm} ({@code /dev/shm/mstar-<uid>}), made mode 0700 on first use and checked before every
 * use, as PostgreSQL and systemd keep their runtime files: nobody else can plant a file, a link or a FIFO
 * at one of our names, squat an entity's mailbox, or read a name. A directory named by {@code MSTAR_SHM_DIR}
 * is the operator's choice and is used as it is, with one warning when other users can write into it
 * (the flat {@code /dev/shm} layout M* uses).
 */
public final class ShmDirectory {
    private static final Logger LOG = LoggerFactory.getLogger(ShmDirectory.class);
    private static final Set<Path> WARNED = ConcurrentHashMap.newKeySet();

    private ShmDirectory() {
    }

    /**
     * Makes {@code dir} ready: the default directory is created (0700) when missing and checked; another
     * directory is used as it is, with a warning, once, when other users may write into it.
     *
     * @throws ConfigurationException when the default directory cannot be made or fails a check
     */
    public static Path prepare(Path dir) {
        if (dir.equals(TransportConfig.defaultShmDir())) {
            return ensurePrivate(dir);
        }
        DirectoryEntries.Seen seen = DirectoryEntries.seen(dir);
        if (seen != null && (seen.mode() & 0022) != 0 && WARNED.add(dir)) {
            LOG.warn("the shared-memory directory is writable by other users: dir={}, mode={}: another user can"
                + " plant files, links or FIFOs at this deployment's names and take an entity's mailbox name; unset"
                + " MSTAR_SHM_DIR for a private directory of this user's, or give the deployment one of mode 0700"
                + " (docs/security.md)", dir, Integer.toOctalString(seen.mode() & 07777));
        }
        return dir;
    }

    /**
     * Creates {@code dir} with mode 0700 when it is missing, then checks that it is a directory (not a
     * link), owned by us, of mode 0700 and on a tmpfs.
     *
     * @throws ConfigurationException naming what failed and how to fix it
     */
    public static Path ensurePrivate(Path dir) {
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------")); // whatever the umask
        } catch (FileAlreadyExistsException e) {
            // made earlier, by us or by someone else: the check below tells which
        } catch (NoSuchFileException e) {
            throw new ConfigurationException("cannot create the private shared-memory directory: " + dir + " ("
                + dir.getParent() + " does not exist): mount a tmpfs there, or set MSTAR_SHM_DIR to a tmpfs directory");
        } catch (IOException e) {
            throw new ConfigurationException("cannot create the private shared-memory directory: " + dir + ", " + e
                + ": set MSTAR_SHM_DIR to a tmpfs directory of this user's");
        }
        check(dir);
        return dir;
    }

    private static void check(Path dir) {
        DirectoryEntries.Seen seen = DirectoryEntries.seen(dir);
        int uid = Posix.geteuid();
        String refused = seen == null ? "it vanished while it was being checked"
            : seen.isSymbolicLink() ? "it is a symbolic link"
            : !seen.isDirectory() ? "it is not a directory"
            : seen.uid() != uid ? "it belongs to uid " + seen.uid() + ", not to us (uid " + uid + ")"
            : (seen.mode() & 07777) != 0700 ? "its mode is " + Integer.toOctalString(seen.mode() & 07777) + ", not 700"
            : !onTmpfs(dir) ? "it is not on a tmpfs (shared memory must not be written back to a disk)"
            : null;
        if (refused != null) {
            throw new ConfigurationException("refusing the private shared-memory directory " + dir + ": " + refused
                + ". Another user can create that name before us in the shared /dev/shm: remove it (as its owner or"
                + " root) if it is not yours, or set MSTAR_SHM_DIR to a directory of this user's with mode 0700 on"
                + " a tmpfs (e.g. install -d -m 0700 /dev/shm/mstar-$USER-1), the same for every process of the"
                + " deployment");
        }
    }

    private static boolean onTmpfs(Path dir) {
        try {
            return Files.getFileStore(dir).type().equals("tmpfs");
        } catch (IOException e) {
            return false;
        }
    }
}
