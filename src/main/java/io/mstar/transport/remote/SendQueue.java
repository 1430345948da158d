package io.mstar.transport.remote;

import io.mstar.transport.TensorDescriptor;

import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.function.Predicate;

/**
 * The tensors sent to one entity while its connection was not up (being made at start, or waiting through a
 * partition), in the order they were sent: a thread of the link's writes them once it is, so that a sender whose
 * outcomes go to a listener never waits for a connection. While any waits here, later sends queue behind them.
 * Bounded: a sender waits while {@value #MAX_TENSORS} are queued. Guarded by its own monitor.
 */
final class SendQueue {
    static final int MAX_TENSORS = 2048;

    /** One tensor to write, under the key it was reported with, by its deadline; its bytes' state, pending since queued. */
    record Queued(TensorDescriptor descriptor, String key, long deadlineNs, PendingTensors.Bytes bytes) {
    }

    private final ArrayDeque<Queued> queued = new ArrayDeque<>();
    private boolean draining;

    /** Whether anything waits to be written: a send goes behind it. */
    synchronized boolean isEmpty() {
        return queued.isEmpty();
    }

    /**
     * Queues one send's tensors together, waiting while the queue has no room for them; false when the deadline
     * passed first (none of them queued).
     */
    synchronized boolean add(List<Queued> batch, long deadlineNs) throws InterruptedException {
        while (!queued.isEmpty() && queued.size() + batch.size() > MAX_TENSORS) {
            long left = deadlineNs - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            wait(Math.max(1, left / 1_000_000));
        }
        queued.addAll(batch);
        return true;
    }

    /**
     * Starts the writer on {@code executor} unless one runs: it writes each tensor in turn, oldest first, and ends
     * when the queue is empty, or when {@code write} returns false (the link closes). A write that throws ends it
     * too, its tensor left first in the queue: the next send starts a writer again.
     */
    void drainOn(Executor executor, Predicate<Queued> write) {
        if (startDraining()) {
            executor.execute(() -> {
                boolean ended = false;
                try {
                    for (Queued q; (q = next()) != null; done()) {
                        if (!write.test(q)) {
                            break;
                        }
                    }
                    ended = true;
                } finally {
                    if (!ended) {
                        stopDraining(); // a write threw: its tensor stays first, for the writer the next send starts
                    }
                }
            });
        }
    }

    private synchronized void stopDraining() {
        draining = false;
    }

    private synchronized boolean startDraining() {
        if (draining) {
            return false;
        }
        draining = true;
        return true;
    }

    // The oldest tensor, left in place while it is written (later sends queue behind it); null ends the writer.
    private synchronized Queued next() {
        Queued q = queued.peek();
        if (q == null) {
            draining = false;
        }
        return q;
    }

    // The oldest tensor was written (or failed): the next one's turn.
    private synchronized void done() {
        queued.poll();
        notifyAll();
    }
}
