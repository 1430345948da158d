package io.mstar.transport.lifecycle;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * Closes what is still open when the JVM stops in order (the end of main, {@code System.exit}, SIGTERM,
 * SIGINT), so an orderly stop leaves no file behind. One shutdown hook for the whole process; closing a
 * resource yourself unregisters it. A SIGKILL runs nothing: the next start's reclaim covers that.
 */
public final class ShutdownCleanup {
    private static final Logger LOG = LoggerFactory.getLogger(ShutdownCleanup.class);
    private static final Set<AutoCloseable> OPEN = new LinkedHashSet<>();
    private static boolean hooked;
    private static boolean stopping; // the hook has taken the list: nothing registered later would be closed

    private ShutdownCleanup() {
    }

    /**
     * Registers a resource to close at an orderly stop. Register before the resource creates its first file.
     *
     * @throws IllegalStateException when the JVM is already stopping: the caller closes what it opened
     */
    public static synchronized void register(AutoCloseable resource) {
        if (stopping) {
            throw new IllegalStateException("the JVM is stopping: nothing new is opened in the shared-memory directory");
        }
        if (!hooked) {
            Runtime.getRuntime().addShutdownHook(new Thread(ShutdownCleanup::closeAll, "mstar-shutdown-cleanup"));
            hooked = true;
        }
        OPEN.add(resource);
    }

    public static synchronized void unregister(AutoCloseable resource) {
        OPEN.remove(resource);
    }

    private static void closeAll() {
        List<AutoCloseable> open;
        synchronized (ShutdownCleanup.class) {
            stopping = true;
            open = new ArrayList<>(OPEN);
            OPEN.clear();
        }
        // Newest first: a transport before the spill transport and arena it holds.
        for (int i = open.size() - 1; i >= 0; i--) {
            try {
                open.get(i).close();
            } catch (Exception | LinkageError e) {
                LOG.warn("cleanup at shutdown failed for {}: {}", open.get(i), e.toString());
            }
        }
    }
}
