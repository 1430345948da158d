package io.mstar.transport.remote;

import io.mstar.transport.RemoteStats;

import java.util.concurrent.atomic.AtomicLong;

/** The cross-node path's counters, updated by the sending threads and the event loop. */
final class RemoteCounters {
    final AtomicLong tensorsSent = new AtomicLong();
    final AtomicLong bytesSent = new AtomicLong();
    final AtomicLong landed = new AtomicLong();
    final AtomicLong timedOut = new AtomicLong();
    final AtomicLong inDoubt = new AtomicLong();
    final AtomicLong refusedThere = new AtomicLong();
    final AtomicLong lateConfirmations = new AtomicLong();
    final AtomicLong tensorsReceived = new AtomicLong();
    final AtomicLong bytesReceived = new AtomicLong();
    final AtomicLong aborted = new AtomicLong();
    final AtomicLong refusedHere = new AtomicLong();
    final AtomicLong duplicates = new AtomicLong();
    final AtomicLong rejectedConnections = new AtomicLong();
    final AtomicLong protocolErrors = new AtomicLong();
    final AtomicLong refused = new AtomicLong();

    RemoteStats snapshot(int connections) {
        return new RemoteStats(tensorsSent.get(), bytesSent.get(), landed.get(), timedOut.get(), inDoubt.get(),
            refusedThere.get(), lateConfirmations.get(), tensorsReceived.get(), bytesReceived.get(), aborted.get(),
            refusedHere.get(), duplicates.get(), connections, rejectedConnections.get(), protocolErrors.get(), refused.get());
    }
}
