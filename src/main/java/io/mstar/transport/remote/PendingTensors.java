package io.mstar.transport.remote;

import io.mstar.transport.RemoteConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The tensors this process sent to other nodes and that are not confirmed yet, one entry per (tensor,
 * consumer): a fan-out to two remote consumers waits for both. Sends are reported to the attached transport
 * under {@code consumer@window} keys, {@value #WINDOWS_PER_TIMEOUT} windows per timeout; a tensor unconfirmed
 * for the timeout marks its consumer's node gone for its window, so the transport frees exactly the tensors
 * sent to it in that window, and tensors of later windows (sent after the node came back) are not touched.
 */
final class PendingTensors {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    static final int WINDOWS_PER_TIMEOUT = 4;

    private record Sent(long msb, long lsb, String to) {
    }

    private record Pending(String key, long sentAt) {
    }

    private final long timeoutNs;
    private final RemoteCounters counters;
    private final RemoteConfig config;
    private final Map<Sent, Pending> pending = new ConcurrentHashMap<>();
    private final Map<String, Long> goneWindows = new ConcurrentHashMap<>(); // "consumer@window" -> window

    PendingTensors(long timeoutNs, RemoteCounters counters, RemoteConfig config) {
        this.timeoutNs = timeoutNs;
        this.counters = counters;
        this.config = config;
    }

    /** The key a send to {@code to} now is reported under. */
    String keyOf(String to) {
        return to + "@" + Long.toHexString(window(System.nanoTime()));
    }

    private long window(long nanoTime) {
        return nanoTime / Math.max(1, timeoutNs / WINDOWS_PER_TIMEOUT) & Long.MAX_VALUE;
    }

    void add(long msb, long lsb, String to, String key) {
        pending.put(new Sent(msb, lsb, to), new Pending(key, System.nanoTime()));
    }

    /** Whether the tensor was still waiting for {@code to}'s confirmation (it is not any more). */
    boolean remove(long msb, long lsb, String to) {
        return pending.remove(new Sent(msb, lsb, to)) != null;
    }

    /** Whether what was reported under {@code key} may still land: false once its window timed out. */
    boolean mayLand(String key) {
        return !goneWindows.containsKey(key);
    }

    /**
     * Marks the windows with a tensor unconfirmed for the timeout gone, on the event loop's timer; each gone
     * consumer is handed to {@code closeFirst} before its window is marked, so its connection's queued writes
     * are discarded before the transport may free their slots.
     */
    void expire(Consumer<String> closeFirst) {
        long now = System.nanoTime();
        goneWindows.values().removeIf(w -> window(now) - w > 100L * WINDOWS_PER_TIMEOUT); // long since freed
        Set<String> gone = null;
        for (Pending p : pending.values()) {
            if (now - p.sentAt() > timeoutNs) {
                (gone == null ? gone = new HashSet<>() : gone).add(p.key());
            }
        }
        if (gone == null) {
            return;
        }
        for (String key : gone) {
            closeFirst.accept(key.substring(0, key.indexOf('@')));
            goneWindows.put(key, Long.parseLong(key.substring(key.indexOf('@') + 1), 16));
            int[] count = {0};
            pending.values().removeIf(p -> p.key().equals(key) && ++count[0] > 0);
            counters.timedOut.addAndGet(count[0]);
            String consumer = key.substring(0, key.indexOf('@'));
            LOG.warn("entity={} at {} confirmed none of {} tensors within {} s: taken as gone for them (an attached"
                + " transport frees them; count in remoteTimedOut)", consumer, config.endpointOf(consumer), count[0],
                config.timeout().toMillis() / 1e3);
        }
    }
}
