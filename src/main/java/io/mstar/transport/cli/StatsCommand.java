package io.mstar.transport.cli;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.lifecycle.ShmDirectory;
import io.mstar.transport.metrics.StatsJson;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.OurFile;
import io.mstar.transport.posix.Posix;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code mstar-shm stats}: the latest stats snapshot of every live arena that publishes one (every arena, an
 * endpoint's included, unless {@code MSTAR_SHM_STATS_PUBLISH=0}); {@code --map} draws each of its segments as a bar of used ({@code #}), free ({@code .}) and mixed
 * ({@code +}) ranges, so fragmentation shows at a glance.
 */
final class StatsCommand {
    private static final Pattern MAP = Pattern.compile(" segmentMap=(\\S*)");
    private static final Pattern ROLE = Pattern.compile("^arena=(\\S+) ");
    // A space followed by an even number of quotes up to the end: one outside every quoted value.
    private static final Pattern FIELD_SEPARATOR = Pattern.compile(" (?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)");

    private StatsCommand() {
    }

    private static final int MAX_STATS_FILE_BYTES = 1 << 20;

    // Through the one checked open: a FIFO or another user's file at a stats name is skipped, never waited on.
    private static List<String> readStatsFile(String path) {
        OurFile file;
        try {
            file = OurFile.open(path, false);
        } catch (NativeCallException | SegmentAccessException e) {
            return null;
        }
        try {
            int size = (int) Math.min(file.status().sizeBytes(), MAX_STATS_FILE_BYTES);
            return new String(Posix.pread(file.fd(), size, 0, path), StandardCharsets.UTF_8).lines().toList();
        } finally {
            Posix.close(file.fd(), path);
        }
    }

    static int run(String[] args, PrintStream out) throws IOException {
        Path dir = TransportConfig.fromEnvironment().shmDir();
        boolean json = false;
        boolean map = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--json")) {
                json = true;
            } else if (args[i].equals("--map")) {
                map = true;
            } else if (args[i].equals("--dir") && i + 1 < args.length) {
                dir = Path.of(args[++i]);
            } else {
                throw new MstarShm.UsageException("unknown option for stats: " + args[i]);
            }
        }
        ShmDirectory.prepare(dir);
        if (!Files.isDirectory(dir)) {
            throw new MstarShm.UsageException("not a directory: " + dir);
        }
        List<String> entries = new ArrayList<>();
        for (String name : Reclaimer.ourNames(dir)) {
            Matcher m = ShmNames.STATS.matcher(name);
            if (!m.matches() || m.group(4) != null) {
                continue; // not a stats file, or a snapshot being written
            }
            boolean live = Reclaimer.isHeld(dir, name);
            List<String> lines = readStatsFile(dir.resolve(name).toString()); // a line for people, then JSON
            if (lines == null) {
                continue; // its owner closed meanwhile, or what is at the name is not a file of ours
            }
            if (lines.size() < 2) {
                continue; // an older format, or a snapshot not written yet
            }
            String line = lines.get(0);
            Matcher segments = MAP.matcher(line);
            String bars = segments.find() ? segments.group(1) : "";
            Matcher role = ROLE.matcher(segments.replaceAll(""));
            String arena = role.find() ? " " + role.group(1) + " arena" : ""; // own, or landing (the cross-node path's)
            String fields = role.replaceAll("");
            if (json) {
                String snapshot = lines.get(1); // {"stats":{...},"segmentMap":[...]}, written from the records
                entries.add("{\"namespace\":\"" + m.group(1) + "\",\"entity\":\"" + m.group(2) + "\",\"owner\":\""
                    + m.group(3) + "\",\"live\":" + live + "," + snapshot.substring(1, map ? snapshot.length() - 1
                    : snapshot.indexOf(",\"segmentMap\":")) + "}");
            } else {
                String head = "namespace " + m.group(1) + " entity " + m.group(2) + arena + " owner " + m.group(3)
                    + (live ? " (live)" : " (DEAD)");
                entries.add(head + "\n" + (map ? drawMap(bars) : onePerLine(fields)));
            }
        }
        if (json) {
            out.println("{\"durationUnit\":" + Json.quote(StatsJson.DURATION_UNIT) + ",\"arenas\":["
                + String.join(",", entries) + "]}");
        } else {
            out.println(entries.isEmpty() ? "no arena publishes stats in " + dir + " (none runs there, or they run"
                + " with MSTAR_SHM_STATS_PUBLISH=0, or with another MSTAR_SHM_DIR)" : String.join("\n", entries));
        }
        return 0;
    }

    /** The snapshot's {@code key=value} fields one per line; a quoted value (cuda="not used yet") stays whole. */
    static String onePerLine(String fields) {
        return "  " + String.join("\n  ", FIELD_SEPARATOR.split(fields.trim()));
    }

    /** One line per segment: its bar, and the share of it in use. */
    static String drawMap(String bars) {
        if (bars.isEmpty()) {
            return "  no segments";
        }
        StringBuilder b = new StringBuilder();
        String[] segments = bars.split(",");
        for (int i = 0; i < segments.length; i++) {
            String bar = segments[i];
            long used = bar.chars().filter(c -> c == '#').count();
            long mixed = bar.chars().filter(c -> c == '+').count();
            b.append(String.format(Locale.ROOT, "  segment %2d |%s| %3d%% used%s%n", i, bar, (200 * used + 100 * mixed) / (2L * bar.length()),
                mixed > 0 ? ", " + mixed + " mixed" : ""));
        }
        return b.append("  (# used, . free, + both; a character is 1/").append(segments[0].length())
            .append(" of a segment)").toString();
    }
}
