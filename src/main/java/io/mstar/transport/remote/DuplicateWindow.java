package io.mstar.transport.remote;

import io.mstar.transport.acks.UuidTable;

/**
 * The tensors one sending entity landed here lately, by the uuid each was first sent under: a tensor sent again
 * after an in-doubt outcome carries the same first uuid, and one found here is confirmed without being handed over
 * a second time (NATS JetStream's message-id window, keyed per sender so that one sender cannot hide another's). A
 * repeat is the same tensor only with the same length and CRC32C: one that differs (another member of the
 * deployment sending under a uuid it saw) is told apart, so that no producer is confirmed for bytes it did not
 * deliver.
 * An entry stays for {@code retainNs} of the sender's time, or until {@value #MAX_TENSORS} younger ones push it
 * out. The sender's time runs while it is heard from: a silence between two of its tensors (a partition, a
 * frozen node, a sender that paused) counts as {@code maxGapNs} at most, so a repost that waited out a partition
 * longer than the window is still known when it lands. Thread-safe: the sender's connections may run on
 * different event loops.
 */
final class DuplicateWindow extends UuidTable {
    /** Entries one sender may hold: 1 Mi uuids, about 60 MB at most, for a sender of a million tensors a minute. */
    static final int MAX_TENSORS = 1 << 20;
    private static final int FIRST_RING = 1024;

    /** What {@link #match} and {@link #add} found. */
    enum Match { ABSENT, SAME, DIFFERENT }

    private final long retainNs;
    private final long maxGapNs;
    private final int maxTensors;
    private long heardNs; // when the sender was last heard (a tensor of its), on this node's clock
    private boolean heard;
    private long senderNs; // the sender's time: how long it was heard from, each silence counted up to maxGapNs
    // Columns of the table: each first send's length and CRC32C.
    private long[] sizes = new long[2 * FIRST_RING];
    private int[] crcs = new int[2 * FIRST_RING];
    // A ring in landing order, three longs an entry: first uuid's msb, lsb, and when it landed (the sender's time).
    private long[] ring = new long[3 * FIRST_RING];
    private int head;
    private int count;
    private long pushedOutYoung; // entries dropped by the cap before their time

    DuplicateWindow(long retainNs, long maxGapNs) {
        this(retainNs, maxGapNs, MAX_TENSORS);
    }

    DuplicateWindow(long retainNs, long maxGapNs, int maxTensors) {
        super(2 * FIRST_RING);
        this.retainNs = retainNs;
        this.maxGapNs = maxGapNs;
        this.maxTensors = maxTensors;
    }

    /**
     * Whether a tensor first sent as this uuid landed here within the window, and whether it had these bytes;
     * {@code nowNs} (this node's clock) is when the sender was heard.
     */
    synchronized Match match(long msb, long lsb, long nbytes, int crc, long nowNs) {
        forgetOlderThan(heardAt(nowNs) - retainNs);
        int i = find(msb, lsb);
        return i < 0 ? Match.ABSENT : sizes[i] == nbytes && crcs[i] == crc ? Match.SAME : Match.DIFFERENT;
    }

    /**
     * Remembers a tensor that lands now; {@link Match#ABSENT} when it was remembered, else what landed under that
     * first uuid before (a duplicate: the same tensor, or a different one).
     */
    synchronized Match add(long msb, long lsb, long nbytes, int crc, long nowNs) {
        Match found = match(msb, lsb, nbytes, crc, nowNs);
        if (found != Match.ABSENT) {
            return found;
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
        ring[at + 2] = senderNs;
        count++;
        int i = super.add(msb, lsb);
        sizes[i] = nbytes;
        crcs[i] = crc;
        return Match.ABSENT;
    }

    /** How many entries the cap dropped before their time: a repost of one of them would be handed over again. */
    synchronized long pushedOutYoung() {
        return pushedOutYoung;
    }

    synchronized int entries() {
        return count;
    }

    // The sender's time once it was heard at nowNs: its silence since it was last heard counts up to maxGapNs.
    private long heardAt(long nowNs) {
        if (!heard) {
            heard = true;
            heardNs = nowNs;
        } else if (nowNs - heardNs > 0) { // two connections may bring their clock readings out of order
            senderNs += Math.min(nowNs - heardNs, maxGapNs);
            heardNs = nowNs;
        }
        return senderNs;
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

    // The ring holds the times; the table's columns, each first send's length and checksum.
    @Override
    protected void moved(int from, int to) {
        sizes[to] = sizes[from];
        crcs[to] = crcs[from];
    }

    @Override
    protected void cleared(int i) {
    }

    @Override
    protected void regrown(int capacity, int[] from) {
        long[] oldSizes = sizes;
        int[] oldCrcs = crcs;
        sizes = new long[capacity];
        crcs = new int[capacity];
        for (int j = 0; j < capacity; j++) {
            if (from[j] >= 0) {
                sizes[j] = oldSizes[from[j]];
                crcs[j] = oldCrcs[from[j]];
            }
        }
    }
}
