package io.mstar.transport.remote;

import org.slf4j.Logger;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Warnings about what peers do, at most one a minute per cause and peer, each saying how many like it were
 * left out since the last: a peer that sends a flood of bad tensors or connections costs the log a line a
 * minute, and the operator still sees how much happened. Thread-safe.
 */
final class RateLimitedWarnings {
    private static final long INTERVAL_NS = 60_000_000_000L;
    private static final int MAX_KEYS = 4096;

    private final Logger log;
    private final Map<String, Window> windows = new ConcurrentHashMap<>();

    private static final class Window {
        long startNs;
        long leftOut;
    }

    RateLimitedWarnings(Logger log) {
        this.log = log;
    }

    /** Logs {@code message} at WARN unless one of the same cause and peer was logged in the last minute. */
    void warn(String cause, Object peer, String message) {
        if (windows.size() > MAX_KEYS) {
            windows.clear(); // a flood of distinct peers: forget, rather than grow
        }
        Window w = windows.computeIfAbsent(cause + "/" + peer, k -> new Window());
        long leftOut;
        synchronized (w) {
            long now = System.nanoTime();
            if (w.startNs != 0 && now - w.startNs < INTERVAL_NS) {
                w.leftOut++;
                return;
            }
            leftOut = w.leftOut;
            w.startNs = now;
            w.leftOut = 0;
        }
        log.warn("{} ({} more like it left out in the minute before; logged at most once a minute per cause and"
            + " peer)", message, leftOut);
    }
}
