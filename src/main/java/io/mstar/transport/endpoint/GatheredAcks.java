package io.mstar.transport.endpoint;

import io.mstar.transport.TensorChannel;
import io.mstar.transport.exceptions.PeerUnavailableException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.locks.ReentrantLock;

/**
 * The ACKs of small tensors whose handlers returned quickly, sent to their producer as one mailbox message, as
 * Aeron's subscriber position covers every message of one poll. At 4 KiB a consumer spent a quarter of its time
 * writing a message per tensor and waking the producer's ACK thread for each (docs/benchmarks.md).
 *
 * <p>An ACK waits at most for the next handler of its poll: the gathered ones go when {@value #MAX} are gathered,
 * before an ACK to another producer or one that is not gathered, and when the poll's handlers are done. When a
 * handler runs on past {@value MailboxReading#IDLE_READ_NS} ns (one that waits on its own window), the endpoint's
 * ACK thread sends them, where the endpoint sends too and so runs one.
 */
final class GatheredAcks {
    private static final Logger LOG = LoggerFactory.getLogger(GatheredAcks.class);
    /** The most ACKs one message gathers. */
    static final int MAX = 8;
    /** The largest tensor whose ACK is gathered: above it the tensor's own cost dwarfs its message's. */
    static final long SMALL_BYTES = 16 << 10;
    /** The longest handler after which an ACK is gathered: a slower one's ACK goes at once. */
    static final long QUICK_NS = 50_000;

    private final TensorChannel.Records records;
    private final ReentrantLock lock = new ReentrantLock();
    private final long[] uuidHalves = new long[2 * MAX]; // guarded by lock
    private String producer; // guarded by lock
    private long since; // when the first was gathered; guarded by lock
    private volatile int count; // written under lock; read without it by the ACK thread, as a hint
    private volatile boolean writing; // a write of the gathered ACKs is in progress: they are not waiting
    private final boolean countZeroedBeforeWrite; // tests only: the order this class once had

    GatheredAcks(TensorChannel.Records records) {
        this(records, false);
    }

    /** @param countZeroedBeforeWrite true only in a model checker's negative control */
    GatheredAcks(TensorChannel.Records records, boolean countZeroedBeforeWrite) {
        this.records = records;
        this.countZeroedBeforeWrite = countZeroedBeforeWrite;
    }

    /** Gathers one ACK, sent at {@code now}; sends those gathered first if they are another producer's. */
    void add(String from, long msb, long lsb, long now) {
        lock.lock();
        try {
            if (count > 0 && !producer.equals(from)) {
                sendLocked();
            }
            if (count == 0) {
                producer = from;
                since = now;
            }
            uuidHalves[2 * count] = msb;
            uuidHalves[2 * count + 1] = lsb;
            count = count + 1;
            if (count == MAX) {
                sendLocked();
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Whether ACKs wait here, not being written: while a write waits for room in a full ring, the ACK thread must go
     * on reading its own mailbox (two endpoints consuming from each other would each wait for the other's reads).
     */
    boolean any() {
        return count > 0 && !writing;
    }

    /**
     * Sends those gathered if the first was gathered more than {@code ns} ago (the ACK thread's part); not while the
     * handling thread sends, which may wait on a full ring that only this thread's next read would drain.
     */
    void sendIfOlderThan(long ns) {
        if (count > 0 && lock.tryLock()) {
            try {
                if (count > 0 && System.nanoTime() - since > ns) {
                    sendLocked();
                }
            } finally {
                lock.unlock();
            }
        }
    }

    /** Sends what is gathered, if anything; a producer that is gone needs none of it. */
    void send() {
        if (count == 0) {
            return; // after each large tensor and most polls: no lock (only the caller's thread gathers)
        }
        lock.lock();
        try {
            sendLocked();
        } finally {
            lock.unlock();
        }
    }

    private void sendLocked() {
        int n = count;
        if (n == 0) {
            return;
        }
        if (countZeroedBeforeWrite) {
            count = 0;
        }
        writing = true;
        try {
            records.sendAcks(producer, uuidHalves, n);
        } catch (PeerUnavailableException e) {
            LOG.debug("ACKs not sent, their producer is gone: {}", e.getMessage());
        } finally {
            // Only once written: a thread that sees none gathered may send a later ACK, which must not pass these.
            count = 0;
            writing = false;
        }
    }
}
