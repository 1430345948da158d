package io.mstar.transport.endpoint;

import io.mstar.transport.TensorChannel;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.remote.RoutedMailbox;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * How an endpoint's threads wait for their mailbox: on the built-in mailboxes, a short spin and then a sleep
 * on the mailbox's futex that a sender's write ends ({@link ShmMailbox#awaitMessage}); on a channel of the
 * application's own, short parks.
 */
interface MessageWait {
    /**
     * Returns when a message may wait, {@code ready} holds, or {@code timeoutNs} passes; early returns are allowed.
     * {@code yields}: whether the thread yields a while before it sleeps (the application's threads do; the ACK
     * thread, measured faster without, does not).
     */
    void awaitMessage(long timeoutNs, BooleanSupplier ready, boolean yields);

    /** Wakes the threads that wait: what they wait for came another way (an outcome another thread decided). */
    void wake();

    static MessageWait of(TensorChannel channel) {
        if (channel instanceof RoutedMailbox routed) {
            return new MessageWait() {
                @Override
                public void awaitMessage(long timeoutNs, BooleanSupplier ready, boolean yields) {
                    routed.awaitMessage(timeoutNs, ready, yields);
                }

                @Override
                public void wake() {
                    routed.local().wake();
                }
            };
        }
        if (channel instanceof ShmMailbox mailbox) {
            return new MessageWait() {
                @Override
                public void awaitMessage(long timeoutNs, BooleanSupplier ready, boolean yields) {
                    mailbox.awaitMessage(timeoutNs, ready, yields);
                }

                @Override
                public void wake() {
                    mailbox.wake();
                }
            };
        }
        return new MessageWait() {
            @Override
            public void awaitMessage(long timeoutNs, BooleanSupplier ready, boolean yields) {
                if (!ready.getAsBoolean()) {
                    LockSupport.parkNanos(Math.min(timeoutNs, 50_000));
                }
            }

            @Override
            public void wake() {
            }
        };
    }
}
