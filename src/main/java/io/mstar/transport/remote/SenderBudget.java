package io.mstar.transport.remote;

import java.util.ArrayList;
import java.util.List;

/**
 * What one sending entity holds in this node (tensors landing, or landed and not yet ACKed by the local
 * consumer), across its connections: at most {@code MSTAR_REMOTE_MAX_INFLIGHT_MB} of bytes and {@code
 * MSTAR_REMOTE_MAX_INFLIGHT_TENSORS} tensors, so that neither a few large tensors nor a flood of empty ones
 * (each a slot or a spill file, an open descriptor) can take the node. A tensor larger than the byte cap is
 * refused outright, before any of it is committed. Connections that found no room wait here and are
 * resumed when room is freed.
 */
final class SenderBudget {
    /** What {@link #take} decided. */
    enum Admission { TAKEN, WAIT, TOO_LARGE }

    private final long maxBytes;
    private final int maxTensors;
    private long heldBytes; // guarded by this
    private int heldTensors; // guarded by this
    private final List<InboundConnection> waiting = new ArrayList<>(); // guarded by this

    SenderBudget(long maxBytes, int maxTensors) {
        this.maxBytes = maxBytes;
        this.maxTensors = maxTensors;
    }

    /** Takes room for a tensor of {@code n} bytes, or registers {@code waiter} to be resumed ({@code WAIT}). */
    synchronized Admission take(long n, InboundConnection waiter) {
        if (n > maxBytes) {
            return Admission.TOO_LARGE;
        }
        if (heldBytes + n > maxBytes || heldTensors >= maxTensors) {
            if (!waiting.contains(waiter)) {
                waiting.add(waiter);
            }
            return Admission.WAIT;
        }
        heldBytes += n;
        heldTensors++;
        return Admission.TAKEN;
    }

    /** Gives back a tensor of {@code n} bytes and resumes the connections that waited. */
    void release(long n) {
        List<InboundConnection> wake;
        synchronized (this) {
            heldBytes -= n;
            heldTensors--;
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
