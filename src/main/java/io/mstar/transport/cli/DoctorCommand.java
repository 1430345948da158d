package io.mstar.transport.cli;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.posix.Posix;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * {@code mstar-shm doctor} and {@code mstar-shm reclaim}: what the library's files in the shared-memory
 * directory are, which deployments are live (someone holds their lock), which processes map each file,
 * and which files belong to dead deployments.
 */
final class DoctorCommand {
    private DoctorCommand() {
    }

    /** One file of a namespace. */
    record FileReport(String name, String kind, String entity, long sizeBytes, Set<Long> mappedBy, boolean orphan) {
    }

    /** One namespace: live or dead, and its files. */
    record NamespaceReport(String id, boolean live, List<FileReport> files) {
        long bytes() {
            return files.stream().mapToLong(FileReport::sizeBytes).sum();
        }
    }

    static List<NamespaceReport> scan(Path dir) {
        Map<String, Set<Long>> mappers = mappersOf(dir);
        List<NamespaceReport> reports = new ArrayList<>();
        for (Map.Entry<String, List<String>> e : Reclaimer.filesByNamespace(dir).entrySet()) {
            boolean live = !Reclaimer.isDead(dir, e.getKey());
            List<FileReport> files = new ArrayList<>();
            for (String name : e.getValue()) {
                Path path = dir.resolve(name);
                long size = 0;
                try {
                    size = Files.size(path);
                } catch (IOException ignored) {
                    // vanished meanwhile
                }
                Set<Long> by = mappers.getOrDefault(path.toString(), Set.of());
                files.add(new FileReport(name, kind(name), entity(name), size, by, !live && by.isEmpty()));
            }
            reports.add(new NamespaceReport(e.getKey(), live, files));
        }
        return reports;
    }

    static int doctor(String[] args, PrintStream out) {
        Options o = Options.parse(args, "--json");
        List<NamespaceReport> reports = scan(o.dir);
        Posix.FileSystemSpace space = Posix.statvfs(o.dir.toString());
        long used = reports.stream().mapToLong(NamespaceReport::bytes).sum();
        boolean healthy = reports.stream().allMatch(NamespaceReport::live);
        if (o.flag) {
            out.println(json(o.dir, reports, space, used, healthy));
        } else {
            out.printf("dir=%s fileSystemBytes=%d availableBytes=%d mstarBytes=%d namespaces=%d%n", o.dir,
                space.totalBytes(), space.availableBytes(), used, reports.size());
            for (NamespaceReport ns : reports) {
                out.printf("namespace %s: %s, %d files, %d bytes%n", ns.id, ns.live ? "live" : "DEAD", ns.files.size(), ns.bytes());
                for (FileReport f : ns.files) {
                    out.printf("  %-8s %12d  entity=%-16s mappedBy=%-16s %s%s%n", f.kind, f.sizeBytes,
                        f.entity == null ? "-" : f.entity, f.mappedBy.isEmpty() ? "-" : f.mappedBy, f.name,
                        f.orphan ? "  ORPHAN" : "");
                }
            }
            out.println(healthy ? "healthy: every namespace has a live process"
                : "found files of dead deployments: run `mstar-shm reclaim --yes` to remove them");
        }
        return healthy ? 0 : 1;
    }

    static int reclaim(String[] args, PrintStream out) {
        Options o = Options.parse(args, "--yes");
        int found = 0;
        for (NamespaceReport ns : scan(o.dir)) {
            if (ns.live) {
                continue;
            }
            if (o.flag) {
                for (String name : Reclaimer.reclaimIfDead(o.dir, ns.id)) {
                    out.println("removed " + o.dir.resolve(name));
                    found++;
                }
            } else {
                for (FileReport f : ns.files) {
                    out.println("would remove " + o.dir.resolve(f.name) + " (" + f.sizeBytes + " bytes)");
                    found++;
                }
            }
        }
        out.println(found == 0 ? "nothing to reclaim" : o.flag ? "removed " + found + " files"
            : found + " files of dead deployments; run again with --yes to remove them");
        return 0;
    }

    private static String kind(String name) {
        if (name.endsWith(".lock")) {
            return "lock";
        }
        String rest = name.substring(23); // after "mstar_<16 hex>_"
        int end = rest.indexOf('_');
        return end < 0 ? "other" : switch (rest.substring(0, end)) {
            case "arena" -> "segment";
            case "spill" -> "spill";
            case "mailbox" -> "mailbox";
            case "stats" -> "stats";
            default -> "other";
        };
    }

    private static String entity(String name) {
        if (name.endsWith(".lock")) {
            return null;
        }
        String[] parts = name.split("_");
        return parts.length >= 4 ? parts[3] : null;
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
                               boolean healthy) {
        StringBuilder b = new StringBuilder();
        b.append("{\"dir\":").append(quote(dir.toString())).append(",\"fileSystemBytes\":").append(space.totalBytes())
            .append(",\"availableBytes\":").append(space.availableBytes()).append(",\"mstarBytes\":").append(used)
            .append(",\"healthy\":").append(healthy).append(",\"namespaces\":[");
        for (int i = 0; i < reports.size(); i++) {
            NamespaceReport ns = reports.get(i);
            b.append(i == 0 ? "" : ",").append("{\"id\":").append(quote(ns.id)).append(",\"live\":").append(ns.live)
                .append(",\"bytes\":").append(ns.bytes()).append(",\"files\":[");
            for (int j = 0; j < ns.files.size(); j++) {
                FileReport f = ns.files.get(j);
                b.append(j == 0 ? "" : ",").append("{\"name\":").append(quote(f.name)).append(",\"kind\":")
                    .append(quote(f.kind)).append(",\"entity\":").append(f.entity == null ? "null" : quote(f.entity))
                    .append(",\"sizeBytes\":").append(f.sizeBytes).append(",\"mappedBy\":").append(f.mappedBy)
                    .append(",\"orphan\":").append(f.orphan).append('}');
            }
            b.append("]}");
        }
        return b.append("]}").toString();
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    /** {@code [--dir DIR] [flag]}. */
    private record Options(Path dir, boolean flag) {
        static Options parse(String[] args, String flagName) {
            Path dir = TransportConfig.fromEnvironment().shmDir();
            boolean flag = false;
            for (int i = 0; i < args.length; i++) {
                if (args[i].equals(flagName)) {
                    flag = true;
                } else if (args[i].equals("--dir") && i + 1 < args.length) {
                    dir = Path.of(args[++i]);
                } else {
                    throw new MstarShm.UsageException("unknown option: " + args[i]);
                }
            }
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                throw new MstarShm.UsageException("not a directory: " + dir);
            }
            return new Options(dir, flag);
        }
    }
}
