package io.mstar.transport.lifecycle;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static io.mstar.transport.posix.Posix.O_CLOEXEC;
import static io.mstar.transport.posix.Posix.O_NOFOLLOW;
import static io.mstar.transport.posix.Posix.O_NONBLOCK;
import static io.mstar.transport.posix.Posix.O_RDONLY;

/**
 * Removes the files of dead owners, file by file, in every namespace of a shared-memory directory
 * (live deployments included). Each of the library's files is locked by its owner for as long as it
 * exists ({@link OwnedFile}), so a file whose lock can be taken has no live owner; the sweep takes the
 * lock, checks that the file it locked is still the one at the path, and only then unlinks it. Removing
 * or replacing any file by hand therefore never makes a live owner's other files look dead: each file
 * answers for itself. A planted symbolic link at one of our names is removed, never followed.
 *
 * <p>A demo working directory ({@code mstar-demo-<nonce>}) is locked by its demo process the same way;
 * once that lock is free, the sweep empties it of dead owners' files and removes it when empty.
 */
public final class Reclaimer {
    private static final Logger LOG = LoggerFactory.getLogger(Reclaimer.class);
    /**
     * Test-only seam: {@code -Dmstar.test.reclaimIgnoresOwners=true} makes the sweep skip the owner check
     * (every file looks dead), so a test can show that the check is what keeps live files.
     */
    static final boolean IGNORE_OWNERS = Boolean.getBoolean("mstar.test.reclaimIgnoresOwners");

    private Reclaimer() {
    }

    /** One file a sweep removed. */
    public record Removed(String name, long sizeBytes) {
    }

    // What reclaimIfDead returns, when asked, for a link or FIFO it removed: not a dead owner's file.
    private static final long PLANTED = -2;

    /**
     * The names in {@code dir} that are the library's files or demo directories of the invoking user, sorted:
     * another user's entry at a name like ours (a squatter, a look-alike, a planted link) is not ours to
     * judge or remove.
     */
    public static List<String> ourNames(Path dir) {
        return ourNames(dir, false);
    }

    /** As {@link #ourNames(Path)}; {@code otherUsers} lists every user's (root's {@code --all-users}). */
    public static List<String> ourNames(Path dir, boolean otherUsers) {
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.filter(p -> isOurName(p.getFileName().toString()) && (otherUsers || DirectoryEntries.ours(p)))
                .map(p -> p.getFileName().toString()).sorted().toList();
        } catch (NoSuchFileException e) {
            return List.of();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir, e);
        }
    }

    private static boolean isOurName(String name) {
        return ShmNames.parse(name) != null || ShmNames.DEMO_DIR.matcher(name).matches();
    }

    /** Removes every file of the invoking user in {@code dir} whose owner is dead; returns what it removed. */
    public static List<Removed> sweep(Path dir) {
        return sweep(dir, false);
    }

    /**
     * As {@link #sweep(Path)}; {@code otherUsers} also removes other users' dead files (root's
     * {@code reclaim --all-users}). Entries that cannot be removed (not ours, EPERM, EACCES) are left and
     * never fail the sweep.
     */
    public static List<Removed> sweep(Path dir, boolean otherUsers) {
        List<Removed> removed = new ArrayList<>();
        List<String> planted = new ArrayList<>();
        for (String name : ourNames(dir, otherUsers)) {
            if (ShmNames.DEMO_DIR.matcher(name).matches()) {
                removed.addAll(sweepDemoDirectory(dir, name, otherUsers));
            } else if (ShmNames.AERON.matcher(name).matches()) {
                long bytes = reclaimDirectoryIfDead(dir, name, otherUsers);
                if (bytes >= 0) {
                    removed.add(new Removed(name, bytes));
                }
            } else {
                long bytes = reclaimIfDead(dir, name, otherUsers, true);
                if (bytes == PLANTED) {
                    planted.add(name);
                } else if (bytes >= 0) {
                    removed.add(new Removed(name, bytes));
                }
            }
        }
        if (!removed.isEmpty()) {
            LOG.warn("removed {} {} of dead owners from {} ({} bytes): {}{}", removed.size(),
                removed.size() == 1 ? "file" : "files", dir, removed.stream().mapToLong(Removed::sizeBytes).sum(),
                removed.stream().limit(10).map(Removed::name).toList(),
                removed.size() > 10 ? " and " + (removed.size() - 10) + " more" : "");
        }
        if (!planted.isEmpty()) {
            LOG.warn("removed {} {} planted at this library's names in {} (never made by it, never followed or"
                + " opened): {}", planted.size(), planted.size() == 1 ? "link or FIFO" : "links or FIFOs", dir,
                planted.stream().limit(10).toList());
            planted.forEach(name -> removed.add(new Removed(name, 0)));
        }
        return removed;
    }

    /**
     * Removes {@code dir/name} when it is the invoking user's and no owner holds it; returns its size, or -1
     * when it was left in place (its owner lives, another user owns it, it is no regular file, or it changed
     * or vanished meanwhile).
     */
    public static long reclaimIfDead(Path dir, String name) {
        return reclaimIfDead(dir, name, false, false); // a planted link or FIFO removed counts 0 bytes
    }

    // As above; with `tellPlanted`, a removed link or FIFO is PLANTED rather than 0 bytes.
    private static long reclaimIfDead(Path dir, String name, boolean otherUsers, boolean tellPlanted) {
        Path entry = dir.resolve(name);
        String path = entry.toString();
        DirectoryEntries.Seen seen = DirectoryEntries.seen(entry);
        if (seen == null || seen.uid() != Posix.geteuid() && !otherUsers) {
            return -1;
        }
        if (seen.isSymbolicLink() || seen.isSpecial()) {
            // We never create links or FIFOs: one at our name is planted; removing it opens and follows nothing.
            return unlinkQuietly(path) ? (tellPlanted ? PLANTED : 0) : -1;
        }
        if (!seen.isRegularFile()) {
            return -1;
        }
        int fd;
        try {
            fd = openToProbe(path);
        } catch (NativeCallException e) {
            return -1;
        }
        try {
            if (!IGNORE_OWNERS && !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                return -1; // its owner lives
            }
            Posix.FileStatus status = Posix.fstat(fd, path);
            if (!status.isRegularFile() || status.uid() != seen.uid() || !OwnedFile.isStillAt(fd, path)) {
                return -1;
            }
            return unlinkQuietly(path) ? status.sizeBytes() : -1;
        } finally {
            Posix.close(fd, path); // drops our lock
        }
    }

    // EPERM or EACCES (another user's entry in a sticky directory) leaves the entry: never a failed sweep.
    private static boolean unlinkQuietly(String path) {
        try {
            return Posix.unlink(path);
        } catch (NativeCallException e) {
            LOG.debug("left in place: {}: {}", path, e.getMessage());
            return false;
        }
    }

    /** Whether a live owner holds {@code dir/name} (false for a missing file). */
    public static boolean isHeld(Path dir, String name) {
        String path = dir.resolve(name).toString();
        int fd;
        try {
            fd = openToProbe(path);
        } catch (NativeCallException e) {
            return false;
        }
        try {
            return !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path);
        } finally {
            Posix.close(fd, path); // also drops the probe's lock, if it got one
        }
    }

    // Non-blocking, so a FIFO planted at one of our names cannot stall the sweep.
    private static int openToProbe(String path) {
        return Posix.open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
    }

    // An Aeron driver's directory: its owner locks the directory itself; once free, all of it goes.
    private static long reclaimDirectoryIfDead(Path dir, String name, boolean otherUsers) {
        int fd = openOwnedDirectory(dir.resolve(name), otherUsers);
        if (fd < 0) {
            return -1;
        }
        String path = dir.resolve(name).toString();
        try {
            if (!IGNORE_OWNERS && !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                return -1; // its owner lives
            }
            if (!OwnedFile.isStillAt(fd, path)) {
                return -1;
            }
            return DirectoryEntries.deleteTree(dir, name);
        } catch (IOException e) {
            LOG.debug("directory not removed: {}: {}", path, e.toString());
            return -1;
        } finally {
            Posix.close(fd, path);
        }
    }

    // A descriptor of a directory of ours (of anyone's with otherUsers), never through a link; -1 when it is not.
    private static int openOwnedDirectory(Path directory, boolean otherUsers) {
        String path = directory.toString();
        int fd;
        try {
            fd = Posix.open(path, O_RDONLY | Posix.O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (NativeCallException e) {
            if (e.errno() == Posix.ELOOP && DirectoryEntries.ours(directory)) {
                unlinkQuietly(path); // a link of ours planted at our name: removed, never followed
            }
            return -1;
        }
        if (!otherUsers && Posix.fstat(fd, path).uid() != Posix.geteuid()) {
            Posix.close(fd, path);
            return -1;
        }
        return fd;
    }

    /** The bytes of the files under {@code root} (an Aeron driver's directory), links not followed. */
    public static long treeBytes(Path root) {
        try (Stream<Path> files = Files.walk(root)) {
            return files.filter(p -> Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)).mapToLong(p -> {
                try {
                    return Files.size(p);
                } catch (IOException e) {
                    return 0; // removed meanwhile
                }
            }).sum();
        } catch (IOException | UncheckedIOException e) {
            return 0;
        }
    }

    private static List<Removed> sweepDemoDirectory(Path dir, String name, boolean otherUsers) {
        Path demo = dir.resolve(name);
        String path = demo.toString();
        int fd = openOwnedDirectory(demo, otherUsers);
        if (fd < 0) {
            return List.of();
        }
        try {
            if (!IGNORE_OWNERS && !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                return List.of(); // the demo lives
            }
            List<Removed> removed = new ArrayList<>(sweep(demo, otherUsers));
            try {
                Files.deleteIfExists(demo); // rmdir: refuses a link and a directory that is not empty
                removed.add(new Removed(name, 0));
            } catch (DirectoryNotEmptyException e) {
                // its children still live, or someone else's files are in it: the next sweep looks again
            } catch (IOException e) {
                LOG.debug("demo directory not removed: {}", e.toString());
            }
            return removed;
        } finally {
            Posix.close(fd, path);
        }
    }
}
