package io.mstar.transport.remote;

import java.util.ArrayList;
import java.util.List;

/**
 * The bytes one sending entity holds in this node's arena (tensors landing, or landed and not yet ACKed by
 * the local consumer), across its connections, capped at {@code MSTAR_REMOTE_MAX_INFLIGHT_MB}. A tensor
 * larger than the cap still comes when the sender holds nothing. Connections that found no room wait here
 * and are resumed when bytes are freed.
 */
final class SenderBudget {
    private final long max;
    private long held; // guarded by this
    private final List<InboundConnection> waiting = new ArrayList<>(); // guarded by this

    SenderBudget(long max) {
        this.max = max;
    }

    /** Takes {@code n} bytes, or registers {@code waiter} to be resumed and returns false. */
    synchronized boolean take(long n, InboundConnection waiter) {
        if (held > 0 && held + n > max) {
            if (!waiting.contains(waiter)) {
                waiting.add(waiter);
            }
            return false;
        }
        held += n;
        return true;
    }

    /** Gives back {@code n} bytes and resumes the connections that waited. */
    void release(long n) {
        List<InboundConnection> wake;
        synchronized (this) {
            held -= n;
            if (waiting.isEmpty()) {
                return;
            }
            wake = new ArrayList<>(waiting);
            waiting.clear();
        }
        wake.forEach(InboundConnection::resumeLater);
    }

    synchronized void forget(InboundConnection connection) {
        waiting.remove(connection);
    }
}
