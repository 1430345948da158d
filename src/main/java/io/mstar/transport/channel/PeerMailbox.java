package io.mstar.transport.channel;

import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.posix.RangeLocks;
import io.mstar.transport.shm.MappedSegment;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A peer's mailbox as this sender mapped it: one incarnation, with a descriptor of its own to probe the
 * owner's lock and to hold this sender's writer slot ({@link MailboxDescriptor#writerSlotOffset}).
 */
final class PeerMailbox {
    private static final Logger LOG = LoggerFactory.getLogger(PeerMailbox.class);

    final String entity;
    final MappedSegment file;
    final ManyToOneRingBuffer ring;
    final Doorbell doorbell;
    final long incarnation;
    final SentByPosition sent; // what this sender sent it by position, until its handled position passes
    private final int probeFd;
    private final int writerSlot; // -1 when every slot was taken
    private final String key;
    private final CloseOnce closer = new CloseOnce();
    volatile long nextCheckNs; // when its owner's lock is probed next (PeerMailboxes)

    PeerMailbox(String entity, MappedSegment file, long incarnation, int probeFd) {
        this.entity = entity;
        this.file = file;
        this.ring = ring(file);
        this.doorbell = new Doorbell(file.memory());
        this.incarnation = incarnation;
        this.probeFd = probeFd;
        this.writerSlot = register(file, probeFd);
        this.key = entity + "@" + Long.toHexString(incarnation);
        this.sent = new SentByPosition(entity, () -> MailboxDescriptor.handled(file.memory()));
    }

    /** The ring of a mailbox file (ours or a peer's). */
    static ManyToOneRingBuffer ring(MappedSegment file) {
        return new ManyToOneRingBuffer(new UnsafeBuffer(file.memory().address(), MailboxDescriptor.RING_FILE_BYTES));
    }

    // Takes a free writer slot: the first one whose byte this open file can lock.
    private static int register(MappedSegment file, int fd) {
        for (int slot = 0; slot < MailboxDescriptor.WRITERS; slot++) {
            long offset = MailboxDescriptor.writerSlotOffset(slot);
            if (RangeLocks.tryLock(fd, offset, 1, file.path())) {
                file.memory().set(ValueLayout.JAVA_BYTE, offset, (byte) 1);
                return slot;
            }
        }
        LOG.warn("every writer slot of a mailbox is taken, writing unregistered: path={}, slots={}", file.path(),
            MailboxDescriptor.WRITERS);
        return -1;
    }

    /** What the producer is told the descriptors went to: this incarnation of the entity. */
    String key() {
        return key;
    }

    boolean ownerAlive() {
        return !probeUnlocked(probeFd, file.path());
    }

    /** The incarnation a mailbox file's owner wrote once its ring was ready, or 0. */
    static long readIncarnation(int fd, String path) {
        byte[] bytes = Posix.pread(fd, 8, MailboxDescriptor.INCARNATION_OFFSET, path);
        return bytes.length < 8 ? 0 : ByteBuffer.wrap(bytes).order(ByteOrder.nativeOrder()).getLong();
    }

    /** True when nobody holds the file's lock (its owner is dead); leaves it unlocked either way. */
    static boolean probeUnlocked(int fd, String path) {
        if (!Posix.flock(fd, Posix.LOCK_SH | Posix.LOCK_NB, path)) {
            return false;
        }
        Posix.flock(fd, Posix.LOCK_UN, path);
        return true;
    }

    /** Frees the writer slot and unmaps; once, since the last thread out of the rings and close() may both get here. */
    void close() {
        closer.close(() -> {
            try {
                if (writerSlot >= 0) {
                    file.memory().set(ValueLayout.JAVA_BYTE, MailboxDescriptor.writerSlotOffset(writerSlot), (byte) 0);
                }
                file.unmap();
            } finally {
                Posix.close(probeFd, file.path()); // drops the writer slot's lock
            }
        });
    }
}
