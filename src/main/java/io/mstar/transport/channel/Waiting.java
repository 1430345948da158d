package io.mstar.transport.channel;

import java.util.function.BooleanSupplier;

/**
 * How a mailbox's reader waits before it sleeps on its {@link Doorbell}: a few looks at the ring, then yields.
 * On a quiet machine a yield hands the core to this process's other thread (the producer, the ACK thread) for a
 * moment and the message often comes meanwhile, cheaper than a sleep and a wake. On a busy one a yield hands the
 * core to a neighbour for a whole time slice: a yield that took {@value #BUSY_YIELD_NS} ns or more turns yields
 * off in this process for {@value #YIELDS_OFF_NS} ns, and waiting threads go to sleep at once.
 */
final class Waiting {
    /** Looks at an empty ring, a pause between two, before a waiting thread yields. */
    static final int SPINS_BEFORE_SLEEP = 20;
    /** Yields, after the looks, before a waiting thread sleeps. */
    static final int YIELDS_BEFORE_SLEEP = 100;
    static final long BUSY_YIELD_NS = 500_000;
    static final long YIELDS_OFF_NS = 100_000_000L;
    private static volatile long yieldsOffUntil = System.nanoTime();

    private Waiting() {
    }

    /**
     * Whether a message or {@code ready} came while it looked, then (with {@code yields}) yielded; called within
     * the mailbox's guard.
     */
    static boolean spinThenYield(RingReader reader, BooleanSupplier ready, RingGuard guard, boolean yields) {
        for (int i = 0; i < SPINS_BEFORE_SLEEP; i++) {
            if (reader.hasMessage() || ready.getAsBoolean()) {
                return true;
            }
            Thread.onSpinWait();
        }
        for (int i = 0; yields && i < YIELDS_BEFORE_SLEEP && System.nanoTime() - yieldsOffUntil > 0 && !guard.isClosed(); i++) {
            if (reader.hasMessage() || ready.getAsBoolean()) {
                return true;
            }
            long before = System.nanoTime();
            Thread.yield();
            long after = System.nanoTime();
            if (after - before > BUSY_YIELD_NS) { // another thread took the core for a time slice: the machine is busy
                yieldsOffUntil = after + YIELDS_OFF_NS;
                break;
            }
        }
        return false;
    }
}
