package io.mstar.transport.arena;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.EnumMap;
import java.util.Map;

/**
 * The operator warnings M*'s arena gives, each logged once per arena however often its condition holds
 * (a full tmpfs or a fragmented arena would otherwise log once per tensor); how often each condition
 * held is kept for tests and the curious. Thread-safe.
 */
final class CapacityWarnings {
    private static final Logger LOG = LoggerFactory.getLogger(CapacityWarnings.class);
    /** Share of the tmpfs in use past which growth warns. */
    static final double SHM_USE_WARN_FRACTION = 0.8;

    /** The conditions. */
    enum Kind {
        /** at construction: the arena's ceiling exceeds the tmpfs's free space */
        CEILING_ABOVE_FREE_SPACE,
        /** on growth: the tmpfs is more than 80% used */
        SHM_ABOVE_80_PERCENT,
        /** at construction: the pin budget exceeds a quarter of physical memory */
        PIN_BUDGET_ABOVE_QUARTER_OF_RAM,
        /** a reserve failed although the free bytes would hold it: no single block does */
        FRAGMENTATION
    }

    private final Map<Kind, Integer> held = new EnumMap<>(Kind.class);

    /** Logs {@code message} the first time {@code kind} holds; counts every time. */
    synchronized void held(Kind kind, String message, Object... args) {
        if (held.merge(kind, 1, Integer::sum) == 1) {
            LOG.warn(message, args);
        }
    }

    /** How often each condition held (each logged once). */
    synchronized Map<Kind, Integer> counts() {
        return Map.copyOf(held);
    }

    /** Warns when pinning {@code pinBudgetBytes} would take more than a quarter of physical memory. */
    void checkPinBudget(boolean pin, long pinBudgetBytes) {
        long physical = physicalMemoryBytes();
        if (pin && physical > 0 && pinBudgetBytes > physical / 4) {
            held(Kind.PIN_BUDGET_ABOVE_QUARTER_OF_RAM, "pin budget is more than a quarter of physical memory, and every"
                    + " process pins up to it: pinBudgetBytes={} ({} MiB), physicalBytes={} ({} MiB): lower {}",
                pinBudgetBytes, pinBudgetBytes >> 20, physical, physical >> 20, "MSTAR_SHM_ARENA_PIN_MAX_MB");
        }
    }

    // MemTotal from /proc/meminfo, or 0 when unknown.
    static long physicalMemoryBytes() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (line.startsWith("MemTotal:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) << 10;
                }
            }
        } catch (IOException | NumberFormatException e) {
            LOG.debug("physical memory unknown: {}", e.toString());
        }
        return 0;
    }
}
