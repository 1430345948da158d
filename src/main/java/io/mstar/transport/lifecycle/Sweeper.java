package io.mstar.transport.lifecycle;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The sweep of dead owners' files ({@link Reclaimer#sweep}) that every process owning files in a
 * directory runs: once when its first owner there starts, then every {@code MSTAR_SHM_RECLAIM_INTERVAL_S}
 * (the first owner's interval; zero turns the periodic sweep off) until its last owner there closes.
 * One daemon thread per process runs every directory's sweeps.
 */
public final class Sweeper {
    private static final Logger LOG = LoggerFactory.getLogger(Sweeper.class);
    private static final Map<Path, Sweeper> BY_DIR = new HashMap<>();
    private static ScheduledExecutorService executor;

    private final Path dir;
    private final ScheduledFuture<?> periodic;
    private int members;

    private Sweeper(Path dir, ScheduledFuture<?> periodic) {
        this.dir = dir;
        this.periodic = periodic;
    }

    /** Joins the sweep of {@code dir}, sweeping it now when this process had no owner there yet. */
    public static Sweeper join(Path dir, Duration interval) {
        Path key = dir.toAbsolutePath().normalize();
        synchronized (Sweeper.class) {
            Sweeper sweeper = BY_DIR.get(key);
            if (sweeper == null) {
                Reclaimer.sweep(key);
                ScheduledFuture<?> periodic = null;
                if (!interval.isZero()) {
                    long periodMs = Math.max(1, interval.toMillis());
                    periodic = executor().scheduleWithFixedDelay(() -> sweepQuietly(key), periodMs, periodMs,
                        TimeUnit.MILLISECONDS);
                }
                sweeper = new Sweeper(key, periodic);
                BY_DIR.put(key, sweeper);
            }
            sweeper.members++;
            return sweeper;
        }
    }

    /** Leaves the sweep; the last member of a directory stops its periodic sweep. Call once per join. */
    public void leave() {
        synchronized (Sweeper.class) {
            assert members > 0 : "left more often than joined: " + dir;
            if (--members == 0) {
                BY_DIR.remove(dir);
                if (periodic != null) {
                    periodic.cancel(false);
                }
            }
        }
    }

    private static void sweepQuietly(Path dir) {
        try {
            Reclaimer.sweep(dir);
        } catch (RuntimeException e) {
            LOG.warn("periodic sweep of {} failed: {}", dir, e.toString());
        }
    }

    private static ScheduledExecutorService executor() {
        if (executor == null) {
            executor = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "mstar-shm-sweeper");
                t.setDaemon(true);
                return t;
            });
        }
        return executor;
    }
}
