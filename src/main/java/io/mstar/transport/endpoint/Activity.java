package io.mstar.transport.endpoint;

/**
 * Whether an application's thread did something (polled, posted) lately, as another thread sees it: the active
 * thread only counts, and reads no clock; the watcher notes when it saw the count move. Threads race on the fields
 * harmlessly: a wrong answer only moves one read of the mailbox by {@code within}.
 */
final class Activity {
    private volatile long count;
    private volatile long seen;
    private volatile long seenAt;

    /** The application's thread acted once more. */
    void acted() {
        count = count + 1;
    }

    /** Whether it acted within the last {@code ns}, as far as this watcher saw. */
    boolean within(long ns) {
        long now = count;
        if (now == 0) {
            return false;
        }
        if (now != seen) {
            seen = now;
            seenAt = System.nanoTime();
            return true;
        }
        return System.nanoTime() - seenAt <= ns;
    }
}
