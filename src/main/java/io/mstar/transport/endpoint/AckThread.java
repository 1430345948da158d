package io.mstar.transport.endpoint;

import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.function.IntSupplier;

/**
 * An endpoint's ACK thread, started with its first send: it reads the mailbox when the application has not
 * for a while ({@code readAcksIfIdle}), so frees and outcomes never wait on the application's polling.
 */
final class AckThread {
    private static final Logger LOG = LoggerFactory.getLogger(AckThread.class);

    private final Thread thread;
    private volatile boolean stopped;

    AckThread(String entity, IntSupplier readAcksIfIdle) {
        this.thread = Thread.ofPlatform().daemon().name("mstar-acks-" + entity).start(() -> run(readAcksIfIdle));
    }

    private void run(IntSupplier readAcksIfIdle) {
        IdleStrategy backoff = new BackoffIdleStrategy(16, 8, 1_000, 100_000); // the mailbox's own receive backoff
        while (!stopped) {
            int read = 0;
            try {
                read = readAcksIfIdle.getAsInt();
            } catch (IllegalStateException e) {
                LOG.debug("the ACK thread stops, the mailbox is closed: {}", e.getMessage()); // by close() or at exit
                return;
            } catch (RuntimeException e) {
                LOG.warn("the ACK thread could not read the mailbox", e);
            }
            backoff.idle(read);
        }
    }

    /** The thread, to recognise it. */
    Thread thread() {
        return thread;
    }

    /** Stops the thread and waits for it, at most a second. */
    void stop() {
        stopped = true;
        thread.interrupt();
        try {
            thread.join(1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
