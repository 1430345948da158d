package io.mstar.transport.channel;

import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import static org.agrona.concurrent.ringbuffer.RecordDescriptor.ALIGNMENT;
import static org.agrona.concurrent.ringbuffer.RecordDescriptor.HEADER_LENGTH;

/**
 * The reading side of a mailbox's ring, over Agrona's {@link ManyToOneRingBuffer} layout (which its senders
 * write with Agrona's own calls), believing nothing a writer put there. Agrona's {@code read} trusts every
 * record length: one impossible length makes it throw on every later read (the ring never delivers again),
 * or, with its bounds checks off, copy past the destination. Here:
 * <ul>
 *   <li>only records between our head and the writers' tail are read, and our head is our own copy (a
 *       writer that scribbles over the trailer cannot move where we read);</li>
 *   <li>a record's length is checked before anything is copied: at least a header, inside what the tail
 *       says was claimed, and inside the ring; a record of an unknown type with a possible length is
 *       skipped by its length;</li>
 *   <li>after an impossible length the reader resynchronises: it steps on, {@value
 *       org.agrona.concurrent.ringbuffer.RecordDescriptor#ALIGNMENT} bytes at a time, to the next position
 *       that holds a possible record header, and drops what lies between; zero words on the way are taken for
 *       a zero-filled record's body, unless no possible header follows (then the first is a writer's claim not
 *       yet written, waited for as Agrona does; {@link DeadWriters} bounds every such wait).</li>
 * </ul>
 * Read space is zeroed, as Agrona's reader does, which the writers' claims and {@code unblock()} rely on.
 * Used by the one polling thread.
 */
final class RingReader {
    private static final int PADDING = -1; // Agrona's padding record type

    private final AtomicBuffer buffer;
    private final int capacity;
    private final int headPositionIndex;
    private final int tailPositionIndex;
    private long head;
    private boolean inGarbage; // a resync stopped at a zero word: the zeros there may be a garbage record's body
    private long skippedRecords;
    private long skippedBytes;

    RingReader(ManyToOneRingBuffer ring) {
        this.buffer = ring.buffer();
        this.capacity = ring.capacity();
        this.headPositionIndex = capacity + RingBufferDescriptor.HEAD_POSITION_OFFSET;
        this.tailPositionIndex = capacity + RingBufferDescriptor.TAIL_POSITION_OFFSET;
        this.head = buffer.getLongVolatile(headPositionIndex);
    }

    /**
     * Hands up to {@code limit} records of known types to {@code handler}, skipping garbage; returns how
     * many it handed on. A record handed on lies wholly inside the ring.
     */
    int read(MailboxMessage.Inbox handler, int limit) {
        int headIndex = (int) head & (capacity - 1);
        if (buffer.getIntVolatile(headIndex) == 0 && !inGarbage) {
            return 0; // nothing committed: an idle poll reads one word, as Agrona's does, not the writers' tail
        }
        long claimed = buffer.getLongVolatile(tailPositionIndex) - head;
        if (claimed <= 0) {
            return 0;
        }
        int end = (int) Math.min(capacity - headIndex, claimed); // bytes this read may cover
        int bytesRead = 0;
        int messages = 0;
        try {
            while (bytesRead < end && messages < limit) {
                int index = headIndex + bytesRead;
                int remaining = end - bytesRead;
                int length = buffer.getIntVolatile(index);
                if (length == 0 && inGarbage) { // zeros after garbage: skipped once a possible header follows
                    int next = nextHeader(index, headIndex + end);
                    if (next < 0) {
                        break;
                    }
                    skipped(next - index);
                    bytesRead += next - index;
                    inGarbage = false;
                    continue;
                }
                if (length == 0 || length < 0 && fits(-length, remaining)) {
                    break; // claimed, not yet committed
                }
                int type = buffer.getInt(index + 4);
                if (!fits(length, remaining)) {
                    bytesRead += resynchronise(index, headIndex + end);
                    continue;
                }
                bytesRead += align(length);
                inGarbage = false;
                if (MailboxMessage.isMessage(type)) {
                    handler.onMessage(type, buffer, index + HEADER_LENGTH, length - HEADER_LENGTH, head + bytesRead);
                    messages++;
                } else if (type != PADDING) {
                    skipped(align(length));
                }
            }
        } finally {
            if (bytesRead > 0) {
                buffer.setMemory(headIndex, bytesRead, (byte) 0);
                head += bytesRead;
                buffer.putLongRelease(headPositionIndex, head);
            }
        }
        return messages;
    }

    /**
     * Whether a committed record waits at the head: for a thread about to sleep, which may call it while another
     * one reads (it looks at the head position the reader published, and a stale answer costs one more look).
     */
    boolean hasMessage() {
        long published = buffer.getLongVolatile(headPositionIndex);
        return inGarbage || buffer.getIntVolatile((int) published & (capacity - 1)) > 0;
    }

    /**
     * What waits unread between the head the reader published and the writers' tail, as {messages, ACKs}: for the
     * operator's stats, from any thread. It only reads, and stops at the first record it cannot step over (one
     * not committed, or garbage), so it may count short while the reader moves; it never reads outside the ring.
     */
    long[] unread() {
        long position = buffer.getLongVolatile(headPositionIndex);
        long tail = buffer.getLongVolatile(tailPositionIndex);
        long messages = 0;
        long acks = 0;
        while (tail - position > 0 && tail - position <= capacity) {
            int index = (int) position & (capacity - 1);
            int length = buffer.getIntVolatile(index);
            if (!fits(length, capacity - index)) {
                break;
            }
            int type = buffer.getInt(index + 4);
            if (MailboxMessage.isMessage(type)) {
                messages++;
                if (type != MailboxMessage.DESCRIPTORS) {
                    acks += MailboxMessage.items(buffer, index + HEADER_LENGTH, length - HEADER_LENGTH);
                }
            }
            position += align(length);
        }
        return new long[] {messages, acks};
    }

    /** The position this reader reads next: every record before it was read. */
    long head() {
        return head;
    }

    /** The writers' tail: every record claimed so far ends at or before it. */
    long tail() {
        return buffer.getLongVolatile(tailPositionIndex);
    }

    /** Records skipped because their length or type was impossible. */
    long skippedRecords() {
        return skippedRecords;
    }

    /** Bytes those records spanned. */
    long skippedBytes() {
        return skippedBytes;
    }

    // Steps from a bad header at `index` to the next possible header before `end`: the bytes skipped. A zero
    // word on the way is garbage (a zero-filled record's body) when a possible header follows it; when none
    // does (yet), the reader stops at the first zero and, knowing it may be garbage, looks again next time.
    private int resynchronise(int index, int end) {
        int q = nextHeader(index + ALIGNMENT, end);
        if (q < 0) {
            q = index + ALIGNMENT;
            while (q < end && buffer.getIntVolatile(q) != 0) {
                q += ALIGNMENT;
            }
            inGarbage = q < end;
        }
        skipped(q - index);
        return q - index;
    }

    // The first position from `from` before `end` that holds a possible record header (zeros passed over), or -1.
    private int nextHeader(int from, int end) {
        for (int q = from; q < end; q += ALIGNMENT) {
            int length = buffer.getIntVolatile(q);
            if (length != 0 && fits(Math.abs(length), end - q) && knownType(buffer.getInt(q + 4), length)) {
                return q;
            }
        }
        return -1;
    }

    private static boolean knownType(int type, int length) {
        return MailboxMessage.isMessage(type) || type == PADDING
            || length < 0 && type == 0; // a claim whose type is not written yet
    }

    // A record of `length` bytes (header included) fits in `remaining` bytes (a multiple of the alignment).
    private static boolean fits(int length, int remaining) {
        return length >= HEADER_LENGTH && length <= remaining && align(length) <= remaining;
    }

    private static int align(int length) {
        return (length + ALIGNMENT - 1) & -ALIGNMENT;
    }

    private void skipped(int bytes) {
        skippedRecords++;
        skippedBytes += bytes;
    }
}
