package io.mstar.transport.channel;

import io.mstar.transport.posix.Posix;
import io.mstar.transport.posix.RangeLocks;
import io.mstar.transport.shm.MappedSegment;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RecordDescriptor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A mailbox's recovery from senders that died: a record claimed and never committed leaves the ring's
 * producer position ahead for good when its writer died, while a slow or frozen writer (GC, SIGSTOP)
 * commits it later. So a record is skipped ({@link ManyToOneRingBuffer#unblock()}) only once the ring has
 * made no progress for {@value ShmMailbox#UNBLOCK_AFTER_MS} ms and a registered sender is dead: its writer
 * slot reads 1 and nobody holds the slot's lock ({@link MailboxDescriptor}). A sender that died while the
 * ring was empty held no claim (a claim moves the producer position), so those slots are cleared while the
 * ring is idle and never count against a slow one. A claim whose writer lives is skipped too once the ring has
 * been stuck on it for {@value ShmMailbox#STUCK_CLAIM_MS} ms: a stopped or buggy writer (or zeros written
 * where a length belongs) must not hold the ring for good; that writer's record is lost, and logged. Used by the polling thread, inside the ring guard.
 */
final class DeadWriters implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DeadWriters.class);

    private final ManyToOneRingBuffer ring;
    private final MappedSegment file;
    private final int writersFd; // a second open file of the mailbox, to see senders' slot locks
    private final String entity;
    private final AtomicLong unblocks = new AtomicLong();
    private long stuckSinceNs = -1;
    private long idleCheckNs = System.nanoTime();
    private static final int IDLE_CLOCK_EVERY = 16;
    private long emptyPolls;

    DeadWriters(ManyToOneRingBuffer ring, MappedSegment file, String entity) {
        this.ring = ring;
        this.file = file;
        this.entity = entity;
        this.writersFd = Posix.open(file.path(), Posix.O_RDWR | Posix.O_NOFOLLOW | Posix.O_CLOEXEC, 0);
    }

    /** A poll read messages: the ring moves. */
    void progressed() {
        stuckSinceNs = -1;
    }

    /** A poll read nothing: skips a dead writer's record that has blocked the ring long enough. */
    void nothingRead() {
        long producerPosition = ring.producerPosition();
        if (producerPosition == ring.consumerPosition()) {
            stuckSinceNs = -1;
            if ((++emptyPolls & (IDLE_CLOCK_EVERY - 1)) != 0) {
                return; // an idle loop polls an empty ring often: the clock is read for one poll in IDLE_CLOCK_EVERY
            }
            long now = System.nanoTime();
            if (now - idleCheckNs > ShmMailbox.UNBLOCK_AFTER_MS * 1_000_000L) {
                idleCheckNs = now;
                List<Integer> dead = dead();
                if (ring.producerPosition() == producerPosition) { // still nothing claimed: they held nothing
                    dead.forEach(this::clear);
                }
            }
            return;
        }
        long now = System.nanoTime();
        if (stuckSinceNs < 0) {
            stuckSinceNs = now;
        } else if (now - stuckSinceNs > ShmMailbox.UNBLOCK_AFTER_MS * 1_000_000L) {
            List<Integer> dead = dead();
            if (!dead.isEmpty() && (ring.unblock() || padClaimToTheEnd())) {
                dead.forEach(this::clear);
                unblocks.incrementAndGet();
                stuckSinceNs = -1;
                LOG.warn("mailbox skipped a record its writer never committed (that writer died): entity={}", entity);
            } else if (now - stuckSinceNs > ShmMailbox.STUCK_CLAIM_MS * 1_000_000L
                && (ring.unblock() || padClaimToTheEnd())) {
                unblocks.incrementAndGet();
                stuckSinceNs = -1;
                LOG.warn("mailbox skipped a record left uncommitted for {} ms by a writer that still lives (stopped,"
                    + " or writing garbage: zeros where a record's length belongs); that record is lost: entity={}",
                    ShmMailbox.STUCK_CLAIM_MS, entity);
            }
        }
    }

    /**
     * Skips a claim whose writer died before writing even its header when it runs to the ring's end (the
     * next record wrapped to the start): {@link ManyToOneRingBuffer#unblock()} looks for the next record's
     * header between the claim and the end, finds none, and would leave the ring blocked until a record
     * landed there. Padding from the claim to the end, as a writer pads before it wraps, lets the reader go
     * on at the start.
     */
    private boolean padClaimToTheEnd() {
        AtomicBuffer buffer = ring.buffer();
        int capacity = ring.capacity();
        long head = ring.consumerPosition();
        int at = (int) (head & (capacity - 1));
        if (ring.producerPosition() - head < capacity - at) {
            return false; // the claimed bytes end before the ring does: unblock() alone would do
        }
        for (int i = at; i < capacity; i += RecordDescriptor.ALIGNMENT) {
            if (buffer.getIntVolatile(i) != 0) {
                return false; // a header was written after all
            }
        }
        buffer.putInt(RecordDescriptor.typeOffset(at), ManyToOneRingBuffer.PADDING_MSG_TYPE_ID);
        buffer.putIntOrdered(RecordDescriptor.lengthOffset(at), capacity - at);
        return true;
    }

    /** Times a record abandoned by a dead writer was skipped. */
    long unblocks() {
        return unblocks.get();
    }

    // Registered senders that died: their slot reads 1 and nobody holds its lock.
    private List<Integer> dead() {
        List<Integer> dead = new ArrayList<>();
        for (int slot = 0; slot < MailboxDescriptor.WRITERS; slot++) {
            long offset = MailboxDescriptor.writerSlotOffset(slot);
            if (file.memory().get(ValueLayout.JAVA_BYTE, offset) != 0
                && !RangeLocks.lockedByOther(writersFd, offset, 1, file.path())) {
                dead.add(slot);
            }
        }
        return dead;
    }

    private void clear(int slot) {
        file.memory().set(ValueLayout.JAVA_BYTE, MailboxDescriptor.writerSlotOffset(slot), (byte) 0);
    }

    @Override
    public void close() {
        Posix.close(writersFd, file.path());
    }
}
