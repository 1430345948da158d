package io.mstar.transport.remote;

import io.mstar.transport.acks.UuidTable;

/**
 * The tensors one sending entity landed here lately, by the uuid each was first sent under: a tensor sent again
 * after an in-doubt outcome carries the same first uuid, and one found here is confirmed without being handed over
 * a second time (NATS JetStream's message-id window, keyed per sender so that one sender cannot hide another's).
 * An entry stays for {@code retainNs}, or until {@value #MAX_TENSORS} younger ones push it out. Thread-safe: the
 * sender's connections may run on different event loops.
 */
final class DuplicateWindow extends UuidTable {
    /** Entries one sender may hold: 1 Mi uuids, about 60 MB at most, for a sender of a million tensors a minute. */
    static final int MAX_TENSORS = 1 << 20;
    private static final int FIRST_RING = 1024;

    private final long retainNs;
    private final int maxTensors;
    // A ring in landing order, three longs an entry: first uuid's msb, lsb, and when it landed.
    private long[] ring = new long[3 * FIRST_RING];
    private int head;
    private int count;
    private long pushedOutYoung; // entries dropped by the cap before their time

    DuplicateWindow(long retainNs) {
        this(retainNs, MAX_TENSORS);
    }

    DuplicateWindow(long retainNs, int maxTensors) {
        super(2 * FIRST_RING);
        this.retainNs = retainNs;
        this.maxTensors = maxTensors;
    }

    /** Whether a tensor first sent as this uuid landed here within the window. */
    synchronized boolean contains(long msb, long lsb, long nowNs) {
        forgetOlderThan(nowNs - retainNs);
        return find(msb, lsb) >= 0;
    }

    /** Remembers a tensor that lands now; false when one first sent as this uuid already did (a duplicate). */
    synchronized boolean add(long msb, long lsb, long nowNs) {
        forgetOlderThan(nowNs - retainNs);
        if (find(msb, lsb) >= 0) {
            return false;
        }
        if (count == maxTensors) {
            dropOldest();
            pushedOutYoung++;
        }
        if (3 * count == ring.length) {
            growRing();
        }
        int at = 3 * ((head + count) % (ring.length / 3));
        ring[at] = msb;
        ring[at + 1] = lsb;
        ring[at + 2] = nowNs;
        count++;
        super.add(msb, lsb);
        return true;
    }

    /** How many entries the cap dropped before their time: a repost of one of them would be handed over again. */
    synchronized long pushedOutYoung() {
        return pushedOutYoung;
    }

    synchronized int entries() {
        return count;
    }

    private void forgetOlderThan(long oldestKeptNs) {
        while (count > 0 && ring[3 * head + 2] - oldestKeptNs < 0) {
            dropOldest();
        }
    }

    private void dropOldest() {
        removeAt(find(ring[3 * head], ring[3 * head + 1]));
        head = (head + 1) % (ring.length / 3);
        count--;
    }

    private void growRing() {
        long[] grown = new long[Math.min(2 * ring.length, 3 * maxTensors)];
        for (int i = 0; i < count; i++) {
            System.arraycopy(ring, 3 * ((head + i) % (ring.length / 3)), grown, 3 * i, 3);
        }
        ring = grown;
        head = 0;
    }

    // The table keeps no columns of its own: the ring holds the times.
    @Override
    protected void moved(int from, int to) {
    }

    @Override
    protected void cleared(int i) {
    }

    @Override
    protected void regrown(int capacity, int[] from) {
    }
}
