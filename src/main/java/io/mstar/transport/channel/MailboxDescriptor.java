package io.mstar.transport.channel;

import io.mstar.transport.codec.DescriptorCodec;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The layout of a mailbox file, which its receiver creates and every sender maps read-write.
 *
 * <pre>
 *   0                    RING_BYTES          RING_FILE_BYTES                          WRITERS_OFFSET           FILE_BYTES
 *   +--------------------+-------------------+----------------------------------------+------------------------+
 *   | Agrona ring buffer | Agrona's trailer  | u64 incarnation | u32 sleeping | u32   | WRITERS writer slots,  |
 *   | (records)          | (positions)       |                 |              | vers. | one byte each          |
 *   +--------------------+-------------------+----------------------------------------+------------------------+
 * </pre>
 *
 * <ul>
 *   <li>The receiver writes its random non-zero incarnation last, once the ring is ready; a sender that
 *       reads 0 treats the mailbox as starting. A process restarted under the same entity makes a new
 *       file with a new incarnation.</li>
 *   <li>A sender registers before its first write: it takes an open-file-description write lock on one
 *       writer slot's byte (free slots are the ones it can lock) and sets the byte to 1; it clears the
 *       byte and drops the lock when it unmaps. The kernel drops the lock when the sender dies, so a slot
 *       that reads 1 and that nobody locks belongs to a dead sender. Only then may the receiver skip a
 *       record that was claimed and never committed: a slow or frozen sender keeps its records.</li>
 *   <li>The receiver writes the format version it speaks before its incarnation; a sender refuses a mailbox of
 *       another version. In the trailer's correlation line (which Agrona's ring leaves to its user) the receiver
 *       publishes its handled position: how far it handled the ring's descriptors (docs/format.md, 12a).</li>
 *   <li>The receiver's threads that wait for a message set {@code sleeping} to 1 and sleep on it (a futex); a
 *       sender that committed a record and reads 1 there sets it to 0 and wakes them ({@link Doorbell}).</li>
 * </ul>
 */
final class MailboxDescriptor {
    /** Bytes of the ring itself (a power of two). */
    static final int RING_BYTES = 1 << 20;
    /** What Agrona's ring buffer spans: the ring and its trailer. */
    static final int RING_FILE_BYTES = RING_BYTES + RingBufferDescriptor.TRAILER_LENGTH;
    static final int INCARNATION_OFFSET = RING_FILE_BYTES;
    static final int SLEEPING_OFFSET = INCARNATION_OFFSET + Long.BYTES;
    static final int VERSION_OFFSET = SLEEPING_OFFSET + Integer.BYTES;
    static final int WRITERS_OFFSET = INCARNATION_OFFSET + 64;
    /** The format this mailbox's receiver speaks: the descriptor's version (a format 1 file reads 0 here). */
    static final int VERSION = DescriptorCodec.VERSION;
    /** The receiver's handled position, an i64 on a line of its own. */
    static final int HANDLED_OFFSET = RING_BYTES + RingBufferDescriptor.CORRELATION_COUNTER_OFFSET;
    /** Senders that can register at once; past that a sender writes unregistered (and says so once). */
    static final int WRITERS = 1024;
    static final int FILE_BYTES = WRITERS_OFFSET + WRITERS;

    private MailboxDescriptor() {
    }

    /** The handled position in a mailbox file's memory, read with acquire. */
    static long handled(MemorySegment file) {
        return (long) HANDLED.getAcquire(file, (long) HANDLED_OFFSET);
    }

    /** Publishes the handled position in our own mailbox file's memory, with release. */
    static void publishHandled(MemorySegment file, long position) {
        HANDLED.setRelease(file, (long) HANDLED_OFFSET, position);
    }

    private static final VarHandle HANDLED = ValueLayout.JAVA_LONG.varHandle();

    static long writerSlotOffset(int slot) {
        assert slot >= 0 && slot < WRITERS : "writer slot out of range: " + slot;
        return WRITERS_OFFSET + slot;
    }
}
