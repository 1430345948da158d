package io.mstar.transport.lifecycle;

import io.mstar.transport.NativeCallException;
import io.mstar.transport.posix.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
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

    /** The names in {@code dir} that are the library's files or demo directories, sorted. */
    public static List<String> ourNames(Path dir) {
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.map(p -> p.getFileName().toString())
                .filter(name -> ShmNames.parse(name) != null || ShmNames.DEMO_DIR.matcher(name).matches())
                .sorted().toList();
        } catch (NoSuchFileException e) {
            return List.of();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir, e);
        }
    }

    /** Removes every file in {@code dir} whose owner is dead; returns what it removed. */
    public static List<Removed> sweep(Path dir) {
        List<Removed> removed = new ArrayList<>();
        for (String name : ourNames(dir)) {
            if (ShmNames.DEMO_DIR.matcher(name).matches()) {
                removed.addAll(sweepDemoDirectory(dir.resolve(name)));
            } else if (ShmNames.AERON.matcher(name).matches()) {
                long bytes = reclaimDirectoryIfDead(dir.resolve(name));
                if (bytes >= 0) {
                    removed.add(new Removed(name, bytes));
                }
            } else {
                long bytes = reclaimIfDead(dir, name);
                if (bytes >= 0) {
                    removed.add(new Removed(name, bytes));
                }
            }
        }
        if (!removed.isEmpty()) {
            LOG.warn("removed {} files of dead owners from {} ({} bytes): {}{}", removed.size(), dir,
                removed.stream().mapToLong(Removed::sizeBytes).sum(), removed.stream().limit(10).map(Removed::name).toList(),
                removed.size() > 10 ? " and " + (removed.size() - 10) + " more" : "");
        }
        return removed;
    }

    /**
     * Removes {@code dir/name} when no owner holds it; returns its size, or -1 when it was left in place
     * (its owner lives, or it changed or vanished meanwhile).
     */
    public static long reclaimIfDead(Path dir, String name) {
        String path = dir.resolve(name).toString();
        int fd;
        try {
            fd = openToProbe(path);
        } catch (NativeCallException e) {
            // We never create links: one at our name is planted, and removing the link touches no target.
            return e.errno() == Posix.ELOOP && Posix.unlink(path) ? 0 : -1;
        }
        try {
            if (!IGNORE_OWNERS && !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                return -1; // its owner lives
            }
            Posix.FileStatus status = Posix.fstat(fd, path);
            if (!status.isRegularFile() || !OwnedFile.isStillAt(fd, path)) {
                return -1;
            }
            return Posix.unlink(path) ? status.sizeBytes() : -1;
        } finally {
            Posix.close(fd, path); // drops our lock
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
    private static long reclaimDirectoryIfDead(Path directory) {
        String path = directory.toString();
        int fd;
        try {
            fd = Posix.open(path, O_RDONLY | Posix.O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (NativeCallException e) {
            return e.errno() == Posix.ELOOP && Posix.unlink(path) ? 0 : -1;
        }
        try {
            if (!IGNORE_OWNERS && !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                return -1; // its owner lives
            }
            if (!OwnedFile.isStillAt(fd, path)) {
                return -1;
            }
            return deleteTree(directory);
        } finally {
            Posix.close(fd, path);
        }
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

    // Removes a tree without following links; returns the bytes of the files removed.
    private static long deleteTree(Path root) {
        long[] bytes = {0};
        try {
            Files.walkFileTree(root, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    bytes[0] += attrs.size();
                    Files.deleteIfExists(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, IOException e) throws IOException {
                    Files.deleteIfExists(d);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            LOG.debug("directory not fully removed: {}: {}", root, e.toString());
        }
        return bytes[0];
    }

    private static List<Removed> sweepDemoDirectory(Path demo) {
        String path = demo.toString();
        int fd;
        try {
            fd = Posix.open(path, O_RDONLY | Posix.O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (NativeCallException e) {
            return List.of();
        }
        try {
            if (!IGNORE_OWNERS && !Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                return List.of(); // the demo lives
            }
            List<Removed> removed = new ArrayList<>(sweep(demo));
            try {
                Files.deleteIfExists(demo);
                removed.add(new Removed(demo.getFileName().toString(), 0));
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
