package io.mstar.transport.lifecycle;

import java.io.IOException;
import java.io.InputStream;

/**
 * Makes a child process exit by itself when its parent dies, however the parent dies (SIGKILL included):
 * the parent starts the child with a pipe on its standard input and never writes to it; the kernel closes
 * the parent's end when the parent dies, and the child reads end-of-file. No timer, no pid.
 */
public final class ParentWatch {
    /** The exit code of a child whose parent died. */
    public static final int PARENT_GONE_EXIT = 75;

    // A second: on a loaded machine the signal's handler thread took longer than 100 ms to start the shutdown.
    private static final long SIGNAL_GRACE_MS = 1000;

    private ParentWatch() {
    }

    private static boolean shuttingDown() {
        Thread probe = new Thread(() -> { });
        try {
            Runtime.getRuntime().addShutdownHook(probe);
            Runtime.getRuntime().removeShutdownHook(probe);
            return false;
        } catch (IllegalStateException e) {
            return true;
        }
    }

    /**
     * Starts a daemon thread that exits the JVM with {@link #PARENT_GONE_EXIT} (shutdown hooks run, so the
     * child's own files are removed) once standard input ends. Call it first thing in a child's main.
     */
    public static void exitWhenParentDies() {
        InputStream in = System.in;
        Thread watch = new Thread(() -> {
            try {
                while (in.read() >= 0) {
                    // the parent writes nothing; anything it does write is ignored
                }
            } catch (IOException ignored) {
                // a closed or broken stdin means the same: the parent is gone
            }
            // A parent that stops us on purpose (Process.destroy) signals first and then closes our stdin:
            // give that signal's shutdown a moment to start, and leave the exit to it.
            try {
                Thread.sleep(SIGNAL_GRACE_MS);
            } catch (InterruptedException e) {
                return;
            }
            if (!shuttingDown()) {
                System.err.println("parent process is gone: exiting");
                System.exit(PARENT_GONE_EXIT);
            }
        }, "mstar-parent-watch");
        watch.setDaemon(true);
        watch.start();
    }
}
