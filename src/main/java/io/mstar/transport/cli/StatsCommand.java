package io.mstar.transport.cli;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.lifecycle.ShmNames;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** {@code mstar-shm stats}: the latest stats snapshot of every live arena that publishes one (stats logging on). */
final class StatsCommand {
    private static final Pattern PAIR = Pattern.compile("(\\w+)=(\"[^\"]*\"|\\S+)");

    private StatsCommand() {
    }

    static int run(String[] args, PrintStream out) throws IOException {
        Path dir = TransportConfig.fromEnvironment().shmDir();
        boolean json = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--json")) {
                json = true;
            } else if (args[i].equals("--dir") && i + 1 < args.length) {
                dir = Path.of(args[++i]);
            } else {
                throw new MstarShm.UsageException("unknown option for stats: " + args[i]);
            }
        }
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
            String line;
            try {
                line = Files.readString(dir.resolve(name)).trim();
            } catch (NoSuchFileException e) {
                continue; // its owner closed meanwhile
            }
            if (json) {
                StringBuilder b = new StringBuilder("{\"namespace\":\"" + m.group(1) + "\",\"entity\":\"" + m.group(2)
                    + "\",\"owner\":\"" + m.group(3) + "\",\"live\":" + live);
                Matcher pair = PAIR.matcher(line);
                while (pair.find()) {
                    String value = pair.group(2);
                    boolean number = value.matches("-?[0-9]+(\\.[0-9]+)?");
                    b.append(",\"").append(pair.group(1)).append("\":")
                        .append(number ? value : "\"" + value.replace("\"", "") + "\"");
                }
                entries.add(b.append('}').toString());
            } else {
                entries.add("namespace " + m.group(1) + " entity " + m.group(2) + " owner " + m.group(3)
                    + (live ? " (live)" : " (DEAD)") + "\n  " + line.replace(" ", "\n  "));
            }
        }
        if (json) {
            out.println("[" + String.join(",", entries) + "]");
        } else {
            out.println(entries.isEmpty() ? "no arena publishes stats in " + dir
                + " (a transport publishes them when stats logging is on)" : String.join("\n", entries));
        }
        return 0;
    }
}
