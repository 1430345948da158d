package io.mstar.transport.lifecycle;

import io.mstar.transport.posix.Posix;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static io.mstar.transport.posix.Posix.O_CLOEXEC;
import static io.mstar.transport.posix.Posix.O_CREAT;
import static io.mstar.transport.posix.Posix.O_NOFOLLOW;
import static io.mstar.transport.posix.Posix.O_RDWR;

/**
 * Finds the namespaces in a shared-memory directory and removes the files of dead ones: a namespace is
 * dead when its lock ({@code mstar_<ns>.lock}) can be taken exclusively (or it has none: a live process
 * always holds one). While holding that exclusive lock, its files are unlinked, then the lock file;
 * a process of that namespace starting meanwhile waits for the lock, finds its file gone, and makes a
 * new one.
 */
public final class Reclaimer {
    private static final Logger LOG = LoggerFactory.getLogger(Reclaimer.class);
    /** Any file the library creates: {@code mstar_<ns>_...} or {@code mstar_<ns>.lock}. */
    public static final Pattern OURS = Pattern.compile("mstar_([0-9a-f]{16})(?:_.+|\\.lock)");

    private Reclaimer() {
    }

    /** The library's files in {@code dir}, by namespace id, sorted. */
    public static Map<String, List<String>> filesByNamespace(Path dir) {
        Map<String, List<String>> byNamespace = new TreeMap<>();
        try (Stream<Path> entries = Files.list(dir)) {
            entries.map(p -> p.getFileName().toString()).sorted().forEach(name -> {
                Matcher m = OURS.matcher(name);
                if (m.matches()) {
                    byNamespace.computeIfAbsent(m.group(1), ns -> new ArrayList<>()).add(name);
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir, e);
        }
        return byNamespace;
    }

    /** Removes the files of every dead namespace in {@code dir}; returns the names removed. */
    public static List<String> reclaimDead(Path dir) {
        List<String> removed = new ArrayList<>();
        for (Map.Entry<String, List<String>> e : filesByNamespace(dir).entrySet()) {
            removed.addAll(reclaimIfDead(dir, e.getKey()));
        }
        if (!removed.isEmpty()) {
            LOG.warn("removed {} files of dead deployments from {}: {}", removed.size(), dir, removed);
        }
        return removed;
    }

    /** Removes the namespace's files when no process holds its lock; returns what it removed (empty if live). */
    public static List<String> reclaimIfDead(Path dir, String namespaceId) {
        String lockName = "mstar_" + namespaceId + ".lock";
        String path = dir.resolve(lockName).toString();
        while (true) {
            int fd = Posix.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
            try {
                if (!Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path)) {
                    return List.of(); // live
                }
                if (!NamespaceLock.isStillAt(fd, path)) {
                    continue; // someone replaced the lock file meanwhile: look again
                }
                List<String> removed = new ArrayList<>();
                for (String name : filesByNamespace(dir).getOrDefault(namespaceId, List.of())) {
                    if (!name.equals(lockName) && Posix.unlink(dir.resolve(name).toString())) {
                        removed.add(name);
                    }
                }
                Posix.unlink(path);
                removed.add(lockName);
                return removed;
            } finally {
                Posix.close(fd, path);
            }
        }
    }

    /** Whether no process holds the namespace's lock (it is dead, or was never started). */
    public static boolean isDead(Path dir, String namespaceId) {
        String path = dir.resolve("mstar_" + namespaceId + ".lock").toString();
        int fd;
        try {
            fd = Posix.open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (RuntimeException e) {
            return true; // no lock file: no live process
        }
        try {
            return Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB, path);
        } finally {
            Posix.close(fd, path); // closing releases the probe's lock, if it got one
        }
    }
}
