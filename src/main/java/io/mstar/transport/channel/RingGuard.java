package io.mstar.transport.channel;

import io.mstar.transport.lifecycle.CloseOnce;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * Who is inside a mailbox's rings now. Agrona reads and writes the rings through raw addresses, which nothing
 * guards once unmapped: a thread touches a ring only between {@link #enter} (or a successful {@link #tryEnter})
 * and {@link #exit}, and close unmaps only once none does (a shutdown hook closes while application threads still
 * poll and send). The last thread out unmaps the peers' mailboxes that were retired meanwhile.
 */
final class RingGuard {
    private final AtomicInteger inside = new AtomicInteger();
    private final CloseOnce closer = new CloseOnce();
    private final PeerMailboxes peers;
    private final String entity;
    // A handler's thread, which may still enter while close waits for it: its ACKs must reach their producers.
    private volatile Thread lateWriter;
    private boolean lateWritesEnded; // guarded by this

    RingGuard(PeerMailboxes peers, String entity) {
        this.peers = peers;
        this.entity = entity;
    }

    /** @throws IllegalStateException once the mailbox is closed */
    void enter() {
        if (!tryEnter()) {
            throw closedException();
        }
    }

    boolean tryEnter() {
        inside.incrementAndGet();
        // Both read after the increment: close sets them before it waits for the count to drain.
        if (closer.isClosed() && lateWriter != Thread.currentThread()) {
            exit();
            return false;
        }
        return true;
    }

    void exit() {
        // A thread that could still use a retired peer is inside, and no thread that enters later can find one.
        if (inside.decrementAndGet() == 0 && peers.hasRetired()) {
            peers.closeRetired();
        }
    }

    /** {@code thread} (or none, null) may enter until {@link #endLateWrites}, though the mailbox closes. */
    synchronized void allowLateWrites(Thread thread) {
        if (!lateWritesEnded) {
            lateWriter = thread;
        }
    }

    /** Close waited for the late writer as long as it waits: from now on no one enters. */
    synchronized void endLateWrites() {
        lateWritesEnded = true;
        lateWriter = null;
    }

    boolean isClosed() {
        return closer.isClosed();
    }

    IllegalStateException closedException() {
        return new IllegalStateException("mailbox is closed: entity=" + entity);
    }

    /** Closes once: runs {@code release}, which calls {@link #awaitNoneInside} before it unmaps. */
    void close(Runnable release) {
        closer.close(release);
    }

    /** Waits until no thread is inside, running {@code nudge} meanwhile (it wakes the ones that sleep). */
    void awaitNoneInside(Runnable nudge) {
        while (inside.get() > 0) { // each leaves within one ring operation, one write attempt or one wake
            nudge.run();
            Thread.onSpinWait();
        }
    }
}
