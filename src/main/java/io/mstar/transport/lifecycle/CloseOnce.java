package io.mstar.transport.lifecycle;

/**
 * The library's one idiom for an idempotent close: the first {@link #close(Runnable)} marks the owner
 * closed, then runs the release; a concurrent second call returns only once the first has finished (so
 * a shutdown hook never lets the JVM exit mid-close), and later ones return at once.
 *
 * <pre>
 *   private final CloseOnce closer = new CloseOnce();
 *   public void close() { closer.close(this::release); }
 *   private void checkOpen() { if (closer.isClosed()) throw new IllegalStateException(...); }
 * </pre>
 */
public final class CloseOnce {
    private volatile boolean closed;

    /**
     * Runs {@code release} on the first call only; see the class comment for concurrent calls.
     *
     * @return true for the call that closed
     */
    public synchronized boolean close(Runnable release) {
        if (closed) {
            return false;
        }
        closed = true;
        release.run();
        return true;
    }

    /** Whether close has begun: checked by operations that must not start afterwards. */
    public boolean isClosed() {
        return closed;
    }
}
