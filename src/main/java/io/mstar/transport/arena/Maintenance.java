package io.mstar.transport.arena;

import io.mstar.transport.lifecycle.CloseOnce;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The periodic work of one arena transport (the stats line, the TTL sweep, the consumer liveness
 * check) on one daemon thread, started by the first task. A task that throws is logged and runs again
 * at its next period. {@link #close()} waits for a task in progress, so none runs once the arena goes.
 */
final class Maintenance implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Maintenance.class);

    private final String threadName;
    private ScheduledExecutorService executor; // guarded by this; null until the first task
    private final CloseOnce closer = new CloseOnce();

    Maintenance(String entity) {
        this.threadName = "mstar-arena-maintenance-" + entity;
    }

    /** Runs {@code task} after {@code firstMs}, then every {@code periodMs}. */
    synchronized void every(long firstMs, long periodMs, Runnable task) {
        if (closer.isClosed()) {
            return;
        }
        if (executor == null) {
            executor = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, threadName);
                t.setDaemon(true);
                return t;
            });
        }
        executor.scheduleWithFixedDelay(() -> {
            try {
                task.run();
            } catch (RuntimeException e) {
                LOG.warn("periodic task failed, it runs again in {} ms: {}", periodMs, e.toString());
            }
        }, firstMs, periodMs, TimeUnit.MILLISECONDS);
    }

    /** Stops every task, waiting up to 5 s for one in progress. */
    @Override
    public void close() {
        closer.close(this::stop);
    }

    private void stop() {
        ScheduledExecutorService toStop;
        synchronized (this) { // a task being scheduled now has its executor once this is entered
            toStop = executor;
        }
        if (toStop == null) {
            return;
        }
        toStop.shutdownNow();
        try {
            toStop.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
