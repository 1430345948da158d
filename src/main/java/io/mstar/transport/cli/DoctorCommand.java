package io.mstar.transport.cli;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.lifecycle.ShmDirectory;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * {@code mstar-shm doctor} and {@code mstar-shm reclaim}: the library's files in the shared-memory
 * directory by namespace and owner, which owners live (they hold their files' locks), which processes
 * map each file, and which files a sweep would remove. Pids are shown for people only; liveness comes
 * from the locks alone.
 */
final class DoctorCommand {
    /** Root's flag: judge (and with reclaim --yes, remove) every user's files, not only the invoking user's. */
    static final String ALL_USERS = "--all-users";
    private DoctorCommand() {
    }

    /** One file: its kind, size, whether its owner holds it, and which processes map it. */
    record FileReport(String name, String kind, long sizeBytes, boolean held, Set<Long> mappedBy) {
    }

    /** One owner (entity and nonce, or the entity's mailbox, or a demo directory) and its files. */
    record OwnerReport(String entity, String owner, Set<Long> pids, List<FileReport> files) {
        boolean live() {
            return files.stream().anyMatch(FileReport::held);
        }

        long bytes() {
            return files.stream().mapToLong(FileReport::sizeBytes).sum();
        }
    }

    /** One namespace (or "demo" for demo directories) and its owners. */
    record NamespaceReport(String id, List<OwnerReport> owners) {
        boolean live() {
            return owners.stream().anyMatch(OwnerReport::live);
        }

        long bytes() {
            return owners.stream().mapToLong(OwnerReport::bytes).sum();
        }

        List<FileReport> deadFiles() {
            return owners.stream().flatMap(o -> o.files().stream()).filter(f -> !f.held()).toList();
        }
    }

    static List<NamespaceReport> scan(Path dir) {
        return scan(dir, false);
    }

    static List<NamespaceReport> scan(Path dir, boolean allUsers) {
        Map<String, Set<Long>> mappers = mappersOf(dir);
        Map<Long, Set<Long>> lockers = lockHoldersByInode();
        Map<String, Map<String, List<FileReport>>> byNamespace = new TreeMap<>();
        Map<String, Set<Long>> pidsByOwner = new HashMap<>();
        for (String name : Reclaimer.ourNames(dir, allUsers)) {
            ShmNames.Parsed parsed = ShmNames.parse(name);
            String ns = parsed == null ? "demo" : parsed.namespace();
            String owner = parsed == null ? name + "/directory" : parsed.entity() + "/" + parsed.owner();
            String kind = parsed == null ? "demo-dir" : parsed.kind().name().toLowerCase(Locale.ROOT);
            Path path = dir.resolve(name);
            long size = 0;
            long inode = -1;
            try {
                size = parsed != null && parsed.kind() == ShmNames.Kind.AERON ? Reclaimer.treeBytes(path)
                    : Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS) ? 0 : Files.size(path);
                inode = ((Number) Files.getAttribute(path, "unix:ino", LinkOption.NOFOLLOW_LINKS)).longValue();
            } catch (IOException | RuntimeException ignored) {
                // vanished meanwhile
            }
            boolean held = Reclaimer.isHeld(dir, name);
            FileReport file = new FileReport(name, kind, size, held,
                mappers.getOrDefault(path.toString(), Set.of()));
            byNamespace.computeIfAbsent(ns, k -> new TreeMap<>()).computeIfAbsent(owner, k -> new ArrayList<>()).add(file);
            pidsByOwner.computeIfAbsent(ns + "|" + owner, k -> new TreeSet<>()).addAll(lockers.getOrDefault(inode, Set.of()));
        }
        List<NamespaceReport> reports = new ArrayList<>();
        byNamespace.forEach((ns, owners) -> {
            List<OwnerReport> list = new ArrayList<>();
            owners.forEach((owner, files) -> {
                int slash = owner.lastIndexOf('/');
                list.add(new OwnerReport(owner.substring(0, slash), owner.substring(slash + 1),
                    pidsByOwner.get(ns + "|" + owner), files));
            });
            reports.add(new NamespaceReport(ns, list));
        });
        return reports;
    }

    static int doctor(String[] args, PrintStream out) {
        Options o = Options.parse(args, "--json", ALL_USERS);
        boolean json = o.flags.contains("--json");
        List<NamespaceReport> reports = scan(o.dir, o.allUsers());
        Posix.FileSystemSpace space = Posix.statvfs(o.dir.toString());
        long used = reports.stream().mapToLong(NamespaceReport::bytes).sum();
        List<FileReport> dead = reports.stream().flatMap(ns -> ns.deadFiles().stream()).toList();
        boolean healthy = dead.isEmpty();
        String fix = "mstar-shm reclaim --dir " + o.dir + (o.allUsers() ? " " + ALL_USERS : "") + " --yes";
        if (json) {
            out.println(json(o.dir, reports, space, used, healthy, fix));
        } else {
            out.printf("dir=%s fileSystemBytes=%d availableBytes=%d mstarBytes=%d namespaces=%d%n", o.dir,
                space.totalBytes(), space.availableBytes(), used, reports.size());
            for (NamespaceReport ns : reports) {
                out.printf("namespace %s: %s, %d owners, %d bytes%n", ns.id(), ns.live() ? "live" : "DEAD",
                    ns.owners().size(), ns.bytes());
                for (OwnerReport owner : ns.owners()) {
                    out.printf("  owner entity=%s owner=%s: %s%s, %d files, %d bytes%n", owner.entity(), owner.owner(),
                        owner.live() ? "live" : "DEAD", owner.pids().isEmpty() ? "" : " (lock held by pid "
                            + owner.pids() + ")", owner.files().size(), owner.bytes());
                    for (FileReport f : owner.files()) {
                        out.printf("    %-8s %12d  mappedBy=%-16s %s%s%n", f.kind(), f.sizeBytes(),
                            f.mappedBy().isEmpty() ? "-" : f.mappedBy(), f.name(), f.held() ? "" : "  DEAD");
                    }
                }
            }
            out.println(healthy ? "healthy: every file has a live owner"
                : "found " + dead.size() + " files of dead owners (" + dead.stream().mapToLong(FileReport::sizeBytes).sum()
                    + " bytes); the next sweep removes them, or now: " + fix);
        }
        return healthy ? 0 : 1;
    }

    static int reclaim(String[] args, PrintStream out) {
        Options o = Options.parse(args, "--yes", "--json", ALL_USERS);
        boolean remove = o.flags.contains("--yes");
        List<FileReport> files = new ArrayList<>();
        if (remove) {
            Reclaimer.sweep(o.dir, o.allUsers()).forEach(r -> files.add(new FileReport(r.name(), "", r.sizeBytes(), false,
                Set.of())));
        } else {
            scan(o.dir, o.allUsers()).forEach(ns -> files.addAll(ns.deadFiles()));
        }
        long bytes = files.stream().mapToLong(FileReport::sizeBytes).sum();
        if (o.flags.contains("--json")) {
            out.println("{\"dir\":" + Json.quote(o.dir.toString()) + ",\"removed\":" + remove + ",\"files\":["
                + String.join(",", files.stream().map(f -> "{\"name\":" + Json.quote(f.name()) + ",\"sizeBytes\":"
                + f.sizeBytes() + "}").toList()) + "],\"bytes\":" + bytes + "}");
            return 0;
        }
        for (FileReport f : files) {
            out.println((remove ? "removed " : "would remove ") + o.dir.resolve(f.name()) + " (" + f.sizeBytes() + " bytes)");
        }
        out.println(files.isEmpty() ? "nothing to reclaim: every file has a live owner"
            : remove ? "removed " + files.size() + " files of dead owners, " + bytes + " bytes"
            : files.size() + " files of dead owners, " + bytes + " bytes; run again with --yes to remove them");
        return 0;
    }

    // Inode to the pids holding a lock on it, from /proc/locks (for people: pids of other PID namespaces differ).
    private static Map<Long, Set<Long>> lockHoldersByInode() {
        Map<Long, Set<Long>> holders = new HashMap<>();
        try (Stream<String> lines = Files.lines(Path.of("/proc/locks"))) {
            lines.forEach(line -> {
                String[] f = line.trim().split("\\s+");
                if (f.length >= 6 && f[1].equals("FLOCK")) {
                    try {
                        long pid = Long.parseLong(f[4]);
                        long inode = Long.parseLong(f[5].substring(f[5].lastIndexOf(':') + 1));
                        holders.computeIfAbsent(inode, k -> new TreeSet<>()).add(pid);
                    } catch (RuntimeException ignored) {
                        // a line of another shape
                    }
                }
            });
        } catch (IOException | UncheckedIOException ignored) {
            // no /proc/locks: no pids to show
        }
        return holders;
    }

    // Path to the pids that map it, from /proc/<pid>/maps (processes of other users are not readable).
    private static Map<String, Set<Long>> mappersOf(Path dir) {
        Map<String, Set<Long>> mappers = new HashMap<>();
        String prefix = dir.toAbsolutePath().normalize() + "/mstar_";
        try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
            for (Path proc : procs.toList()) {
                String pid = proc.getFileName().toString();
                if (!pid.chars().allMatch(Character::isDigit)) {
                    continue;
                }
                try (Stream<String> lines = Files.lines(proc.resolve("maps"))) {
                    lines.forEach(line -> {
                        int at = line.indexOf(prefix);
                        if (at >= 0) {
                            String path = line.substring(at).replace(" (deleted)", "").trim();
                            mappers.computeIfAbsent(path, p -> new TreeSet<>()).add(Long.parseLong(pid));
                        }
                    });
                } catch (IOException | RuntimeException ignored) {
                    // the process ended, or is not ours to read
                }
            }
        } catch (IOException ignored) {
            // no /proc: nothing is known to map anything
        }
        return mappers;
    }

    private static String json(Path dir, List<NamespaceReport> reports, Posix.FileSystemSpace space, long used,
                               boolean healthy, String fix) {
        StringBuilder b = new StringBuilder();
        b.append("{\"dir\":").append(quote(dir.toString())).append(",\"fileSystemBytes\":").append(space.totalBytes())
            .append(",\"availableBytes\":").append(space.availableBytes()).append(",\"mstarBytes\":").append(used)
            .append(",\"healthy\":").append(healthy).append(",\"fix\":").append(healthy ? "null" : quote(fix))
            .append(",\"namespaces\":[");
        for (int i = 0; i < reports.size(); i++) {
            NamespaceReport ns = reports.get(i);
            b.append(i == 0 ? "" : ",").append("{\"id\":").append(quote(ns.id())).append(",\"live\":").append(ns.live())
                .append(",\"bytes\":").append(ns.bytes()).append(",\"owners\":[");
            for (int j = 0; j < ns.owners().size(); j++) {
                OwnerReport o = ns.owners().get(j);
                b.append(j == 0 ? "" : ",").append("{\"entity\":").append(quote(o.entity())).append(",\"owner\":")
                    .append(quote(o.owner())).append(",\"live\":").append(o.live()).append(",\"pids\":")
                    .append(o.pids()).append(",\"bytes\":").append(o.bytes()).append(",\"files\":[");
                for (int k = 0; k < o.files().size(); k++) {
                    FileReport f = o.files().get(k);
                    b.append(k == 0 ? "" : ",").append("{\"name\":").append(quote(f.name())).append(",\"kind\":")
                        .append(quote(f.kind())).append(",\"sizeBytes\":").append(f.sizeBytes()).append(",\"held\":")
                        .append(f.held()).append(",\"mappedBy\":").append(f.mappedBy()).append('}');
                }
                b.append("]}");
            }
            b.append("]}");
        }
        return b.append("]}").toString();
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** {@code [--dir DIR] [flag]}. */
    private record Options(Path dir, Set<String> flags) {
        boolean allUsers() {
            return flags.contains(ALL_USERS);
        }

        static Options parse(String[] args, String... flagNames) {
            Path dir = TransportConfig.fromEnvironment().shmDir();
            Set<String> flags = new HashSet<>();
            for (int i = 0; i < args.length; i++) {
                if (List.of(flagNames).contains(args[i])) {
                    flags.add(args[i]);
                } else if (args[i].equals("--dir") && i + 1 < args.length) {
                    dir = Path.of(args[++i]);
                } else {
                    throw new MstarShm.UsageException("unknown option: " + args[i]);
                }
            }
            ShmDirectory.prepare(dir);
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                throw new MstarShm.UsageException("not a directory: " + dir);
            }
            if (flags.contains(ALL_USERS) && Posix.geteuid() != 0) {
                throw new MstarShm.UsageException(ALL_USERS + " is root's: without it, only your own files are"
                    + " judged and removed");
            }
            return new Options(dir, flags);
        }
    }
}
