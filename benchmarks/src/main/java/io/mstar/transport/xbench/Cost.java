package io.mstar.transport.xbench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * What this JVM spends per payload: CPU time and context switches of all its threads (a switch is a thread
 * giving up its core, or having it taken: each hand-off between threads costs at least one) and the bytes
 * they allocate. A side takes a {@link #snapshot()} where its measured part begins and prints a {@code COST}
 * line where it ends.
 */
final class Cost {
    private Cost() {
    }

    /** {CPU nanoseconds, context switches, bytes allocated} so far, over every thread of this JVM. */
    static long[] snapshot() {
        return new long[] {
            ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime(),
            contextSwitches(),
            ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean()).getTotalThreadAllocatedBytes()};
    }

    /** {@code COST side size cpu-us switches bytes}, each per payload since {@code from}. */
    static String line(String side, long size, long[] from, long payloads) {
        long[] to = snapshot();
        return String.format(Locale.ROOT, "COST %s %d %.3f %.3f %.2f", side, size,
            (to[0] - from[0]) / 1e3 / payloads, (double) (to[1] - from[1]) / payloads,
            (double) (to[2] - from[2]) / payloads);
    }

    /** {@code JIT side ticks}: the CPU clock ticks this JVM's JIT compiler threads used so far. */
    static String jitLine(String side) {
        return "JIT " + side + " " + compilerTicks(ProcessHandle.current().pid());
    }

    /** CPU clock ticks (user + system) of process {@code pid}'s JIT compiler threads so far, from /proc. */
    static long compilerTicks(long pid) {
        long ticks = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                try {
                    String stat = Files.readString(task.resolve("stat"));
                    if (stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')')).contains("CompilerThre")) {
                        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                        ticks += Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
                    }
                } catch (IOException | RuntimeException gone) {
                    // the thread ended between the listing and the read
                }
            }
        } catch (IOException gone) {
            return 0;
        }
        return ticks;
    }

    // Voluntary and involuntary switches of every thread, from /proc (0 where there is none).
    private static long contextSwitches() {
        long sum = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
            for (Path task : tasks) {
                try {
                    for (String line : Files.readAllLines(task.resolve("status"))) {
                        if (line.contains("ctxt_switches:")) {
                            sum += Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
                        }
                    }
                } catch (IOException | RuntimeException gone) {
                    // the thread ended between the listing and the read
                }
            }
        } catch (IOException noProc) {
            return 0;
        }
        return sum;
    }
}
