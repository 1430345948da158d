package io.mstar.transport.remote;

import io.mstar.transport.RemoteStats;

import java.util.concurrent.atomic.AtomicLong;

/** The cross-node path's counters, updated by the sending threads and the link's thread. */
final class RemoteCounters {
    final AtomicLong tensorsSent = new AtomicLong();
    final AtomicLong bytesSent = new AtomicLong();
    final AtomicLong landed = new AtomicLong();
    final AtomicLong timedOut = new AtomicLong();
    final AtomicLong lateConfirmations = new AtomicLong();
    final AtomicLong tensorsReceived = new AtomicLong();
    final AtomicLong bytesReceived = new AtomicLong();
    final AtomicLong aborted = new AtomicLong();
    final AtomicLong misrouted = new AtomicLong();
    final AtomicLong refused = new AtomicLong();

    RemoteStats snapshot() {
        return new RemoteStats(tensorsSent.get(), bytesSent.get(), landed.get(), timedOut.get(),
            lateConfirmations.get(), tensorsReceived.get(), bytesReceived.get(), aborted.get(), misrouted.get(),
            refused.get());
    }
}
