package io.mstar.transport.remote;

import io.mstar.transport.RemoteConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * The tensors this process sent to other nodes and that are not confirmed yet, one entry per (tensor,
 * consumer): a fan-out to two remote consumers waits for both. Sends are reported to the attached transport
 * under {@code consumer@window} keys, {@value #WINDOWS_PER_TIMEOUT} windows per timeout; a tensor unconfirmed
 * for the timeout marks its consumer's node gone for its window, so the transport frees exactly the tensors
 * sent to it in that window, and tensors of later windows (sent after the node came back) are not touched.
 *
 * <p>Each tensor that times out is told before its window is marked gone, with what is known of its bytes: a
 * tensor never handed to the connection, or whose write failed before the connection took all of it, cannot
 * have been handed over there (a definite failure); one handed whole may have been (in doubt). A tensor is
 * either handed or given up, never both: the two race on one compare-and-set.
 */
final class PendingTensors {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    static final int WINDOWS_PER_TIMEOUT = 4;

    private record Sent(long msb, long lsb, String to) {
    }

    private record Pending(String key, long sentAt, Bytes bytes) {
    }

    /**
     * What is known of one pending tensor's bytes, given to the connection that writes them; moved by
     * compare-and-set only, so a tensor is either handed to the connection or given up, never both.
     */
    static final class Bytes {
        private static final int WAITING = 0; // not handed to the connection yet: none of it left
        private static final int HANDED = 1; // handed to the connection: all of it may have left
        private static final int WRITE_FAILED = 2; // the connection failed before it took all of it: no whole copy left
        private static final int GIVEN_UP = 3; // timed out before it was handed: it never will be
        private final AtomicInteger state = new AtomicInteger(WAITING);

        /** The bytes are about to be handed to the connection: false when the tensor timed out first (not to write). */
        boolean hand() {
            return state.compareAndSet(WAITING, HANDED);
        }

        /** The connection failed before it took all of the bytes: the other node cannot have a whole copy. */
        void writeFailed() {
            state.compareAndSet(HANDED, WRITE_FAILED);
        }

        // Timed out: a write that did not start now never does; returns whether all of it may have left.
        boolean giveUp() {
            state.compareAndSet(WAITING, GIVEN_UP);
            return state.get() == HANDED;
        }
    }

    /** Told of each tensor whose consumer did not confirm it within the timeout, before it is freed. */
    interface TimedOut {
        /** {@code bytesLeft}: all of it may have reached the other node; else none of it did, or not all. */
        void tensor(String consumer, long msb, long lsb, boolean bytesLeft);
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

    /** A tensor about to be sent: pending until confirmed or timed out; its bytes' state goes to its writer. */
    Bytes add(long msb, long lsb, String to, String key) {
        Bytes bytes = new Bytes();
        pending.put(new Sent(msb, lsb, to), new Pending(key, System.nanoTime(), bytes));
        return bytes;
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
    void expire(Consumer<String> closeFirst, TimedOut timedOut) {
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
            String consumer = key.substring(0, key.indexOf('@'));
            closeFirst.accept(consumer);
            int count = 0;
            for (var it = pending.entrySet().iterator(); it.hasNext(); ) {
                var e = it.next();
                if (e.getValue().key().equals(key)) {
                    it.remove();
                    count++;
                    boolean bytesLeft = e.getValue().bytes().giveUp();
                    if (bytesLeft) {
                        counters.inDoubt.incrementAndGet();
                    }
                    timedOut.tensor(consumer, e.getKey().msb(), e.getKey().lsb(), bytesLeft);
                }
            }
            goneWindows.put(key, Long.parseLong(key.substring(key.indexOf('@') + 1), 16));
            counters.timedOut.addAndGet(count);
            LOG.warn("entity={} at {} confirmed none of {} tensors within {} s: taken as gone for them (an attached"
                + " transport frees them; count in remoteTimedOut)", consumer, config.endpointOf(consumer), count,
                config.timeout().toMillis() / 1e3);
        }
    }
}
