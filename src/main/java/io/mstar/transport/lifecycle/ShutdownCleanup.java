package io.mstar.transport.lifecycle;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * Closes what is still open when the JVM stops in order (the end of main, {@code System.exit}, SIGTERM,
 * SIGINT), so an orderly stop leaves no file behind. One shutdown hook for the whole process; closing a
 * resource yourself unregisters it. A SIGKILL runs nothing: the next start's reclaim covers that.
 *
 * <p>A stop can land at any instant, also while a file is being made: what is made through
 * {@link #registerNew} is registered as part of its making, and the hook waits (up to {@value
 * #CREATIONS_WAIT_MS} ms) for makings under way before it takes the list, so nothing made is missed.
 */
public final class ShutdownCleanup {
    private static final Logger LOG = LoggerFactory.getLogger(ShutdownCleanup.class);
    private static final Set<AutoCloseable> OPEN = new LinkedHashSet<>();
    private static boolean hooked;
    private static boolean stopping; // the hook has taken the list: nothing registered later would be closed
    private static int creating; // makings under way in registerNew
    static final long CREATIONS_WAIT_MS = 5_000;

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
        hook();
        OPEN.add(resource);
    }

    /**
     * Makes a resource (a file, a directory, or what holds them) and registers it, so that a stop at any
     * instant of the making closes it too.
     *
     * @throws IllegalStateException when the JVM is already stopping; nothing is made then
     */
    public static <T extends AutoCloseable> T registerNew(Supplier<T> make) {
        synchronized (ShutdownCleanup.class) {
            if (stopping) {
                throw new IllegalStateException("the JVM is stopping: nothing new is opened in the shared-memory"
                    + " directory");
            }
            creating++;
        }
        T made = null;
        try {
            made = make.get();
            return made;
        } finally {
            synchronized (ShutdownCleanup.class) {
                if (made != null) {
                    hook();
                    OPEN.add(made); // also once stopping: the hook waits for this before it takes the list
                }
                creating--;
                ShutdownCleanup.class.notifyAll();
            }
        }
    }

    public static synchronized void unregister(AutoCloseable resource) {
        OPEN.remove(resource);
    }

    private static void hook() {
        if (!hooked) {
            Runtime.getRuntime().addShutdownHook(new Thread(ShutdownCleanup::closeAll, "mstar-shutdown-cleanup"));
            hooked = true;
        }
    }

    private static void closeAll() {
        List<AutoCloseable> open;
        synchronized (ShutdownCleanup.class) {
            stopping = true;
            long deadline = System.nanoTime() + CREATIONS_WAIT_MS * 1_000_000L;
            while (creating > 0 && System.nanoTime() < deadline) {
                try {
                    ShutdownCleanup.class.wait(10);
                } catch (InterruptedException e) {
                    break;
                }
            }
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
