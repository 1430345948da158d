package io.mstar.transport.channel;

import io.mstar.transport.Deployment;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.naming.ShmNames;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;

/**
 * The layout of one message in a mailbox's ring, and its validation on the way out. The ring's record
 * type says what the message carries.
 *
 * <pre>
 *   message (little-endian), type 1 = descriptors, 2 = ACKs, 3 = refusals and 4 = kept (laid out as ACKs):
 *  +----------+---------------------+-----------+-------------------------------------------+
 *  | u8 n     | sender entity (n B) | u16 count | count descriptor records | count x 16 B uuid |
 *  +----------+---------------------+-----------+-------------------------------------------+
 * </pre>
 * Descriptor records are {@link DescriptorCodec}'s; a uuid is its most significant half, then its least.
 * A message is published whole by the ring (a positive record length, written last).
 */
final class MailboxMessage {
    /** Record type of a message of descriptors. */
    static final int DESCRIPTORS = 1;
    /** Record type of a message of ACKs. */
    static final int ACKS = 2;
    /**
     * Record type of a message of refusals: tensors the consumer would not hand over (their slot was reused
     * under it); laid out as ACKs, and like an ACK each frees the consumer's share.
     */
    static final int REFUSALS = 3;
    /**
     * Record type of a message of kept tensors: sent by position, handled, and kept past their handlers; laid out as
     * ACKs. The handled position does not free them: an ACK or a refusal follows each.
     */
    static final int KEPT = 4;
    /** Bytes of one ACK. */
    static final int UUID_LENGTH = 16;
    private static final int MAX_ENTITY_LENGTH = 64;
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private MailboxMessage() {
    }

    /** Takes a uuid by its halves. */
    interface UuidSink {
        void accept(long msb, long lsb);
    }

    /** Whether a ring record of this type is a message (else it is padding or garbage). */
    static boolean isMessage(int type) {
        return type == DESCRIPTORS || type == ACKS || type == REFUSALS || type == KEPT;
    }

    /** The item count in a message's header, or 0 when its sender name does not fit the message. */
    static int items(DirectBuffer buffer, int index, int length) {
        int n = Byte.toUnsignedInt(buffer.getByte(index));
        return length < 1 + n + 2 ? 0 : Short.toUnsignedInt(buffer.getShort(index + 1 + n, ByteOrder.LITTLE_ENDIAN));
    }

    /**
     * Starts a message from a sender (its entity name in ASCII) in a little-endian buffer; the count follows
     * with {@link #finish}.
     */
    static void start(ByteBuffer message, byte[] senderAscii) {
        message.clear();
        message.put((byte) senderAscii.length).put(senderAscii).putShort((short) 0);
    }

    /** Writes the count of items the message holds, behind a sender name of {@code senderLength} bytes. */
    static void finish(ByteBuffer message, int senderLength, int count) {
        message.putShort(1 + senderLength, (short) count);
    }

    /**
     * Messages copied out of a ring by one poll, back to back, then decoded and handed to the listener:
     * the copy area, the per-message columns and the last sender's name are reused, so a poll of messages
     * from a known sender allocates only what the listener receives. Used by the polling thread only.
     */
    static final class Inbox {
        private final byte[] bytes = new byte[MailboxDescriptor.RING_BYTES]; // one poll reads at most the ring
        private final MemorySegment area = MemorySegment.ofArray(bytes);
        private int[] types = new int[16];
        private int[] offsets = new int[16];
        private int[] lengths = new int[16];
        private long[] ends = new long[16]; // the ring position just past each message
        private int count;
        private int end;
        private String lastSender = "";
        private byte[] lastSenderBytes = new byte[0];
        private long p; // the cursor of the message being dispatched, after begin()
        private long limit;
        private int items;

        /** Copies one message out of the ring; {@code ringEnd} is the ring position just past its record. */
        void onMessage(int type, MutableDirectBuffer buffer, int index, int length, long ringEnd) {
            if (count == types.length) {
                types = Arrays.copyOf(types, 2 * count);
                offsets = Arrays.copyOf(offsets, 2 * count);
                lengths = Arrays.copyOf(lengths, 2 * count);
                ends = Arrays.copyOf(ends, 2 * count);
            }
            ends[count] = ringEnd;
            buffer.getBytes(index, bytes, end, length);
            types[count] = type;
            offsets[count] = end;
            lengths[count] = length;
            end += length;
            count++;
        }

        int count() {
            return count;
        }

        int type(int i) {
            return types[i];
        }

        int length(int i) {
            return lengths[i];
        }

        void clear() {
            count = 0;
            end = 0;
        }

        /**
         * Decodes message {@code i} and hands it to the listener.
         *
         * @throws DescriptorFormatException naming what does not decode; the listener is not called then
         */
        void dispatch(int i, Deployment reader, TensorChannel.Listener listener) {
            String from = begin(i);
            if (types[i] == KEPT) {
                return; // only an endpoint sends by position; a channel's own listener ACKs by message
            }
            if (types[i] == ACKS || types[i] == REFUSALS) {
                List<UUID> uuids = new ArrayList<>(items);
                for (int k = 0; k < items; k++, p += UUID_LENGTH) {
                    uuids.add(new UUID(area.get(LONG, p), area.get(LONG, p + 8)));
                }
                if (types[i] == ACKS) {
                    listener.acks(from, uuids);
                } else {
                    listener.refusals(from, uuids);
                }
            } else {
                List<TensorDescriptor> descriptors = new ArrayList<>(items);
                for (int k = 0; k < items; k++) {
                    int length = DescriptorCodec.recordLength(area, p, limit - p);
                    descriptors.add(DescriptorCodec.decode(area, p, length, reader));
                    p += length;
                }
                listener.descriptors(from, descriptors);
            }
        }

        /**
         * Hands message {@code i}'s descriptor records and ACKs to the listener in place, one by one; the records
         * are framed here (every length checked before any is handed on) and validated by whoever reads them
         * ({@code TensorTransport.receive(record, ...)}).
         *
         * @throws DescriptorFormatException when the message's framing is bad; nothing is handed on then
         */
        void dispatchRecords(int i, TensorChannel.RecordListener listener, UuidSink kept) {
            String from = begin(i);
            if (types[i] == ACKS) {
                for (int k = 0; k < items; k++, p += UUID_LENGTH) {
                    listener.ack(from, area.get(LONG, p), area.get(LONG, p + 8));
                }
            } else if (types[i] == REFUSALS) {
                for (int k = 0; k < items; k++, p += UUID_LENGTH) {
                    listener.refused(from, area.get(LONG, p), area.get(LONG, p + 8));
                }
            } else if (types[i] == KEPT) {
                for (int k = 0; k < items; k++, p += UUID_LENGTH) {
                    kept.accept(area.get(LONG, p), area.get(LONG, p + 8));
                }
            } else {
                while (p < limit) { // framed by begin(): every record's length fits
                    int length = DescriptorCodec.recordLength(area, p, limit - p);
                    listener.descriptor(from, area, p, length);
                    p += length;
                }
                listener.endOfMessage(ends[i]);
            }
        }

        // Reads message i's header and checks its framing: the sender, and the cursor over its items.
        private String begin(int i) {
            int type = types[i];
            p = offsets[i];
            limit = p + lengths[i];
            int n = Byte.toUnsignedInt(area.get(ValueLayout.JAVA_BYTE, p));
            if (n == 0 || n > MAX_ENTITY_LENGTH || limit - p < 1 + n + 2) {
                throw new DescriptorFormatException("sender", "bad sender name length " + n);
            }
            String from = sender((int) p + 1, n);
            p += 1 + n;
            items = Short.toUnsignedInt(area.get(SHORT, p));
            p += 2;
            if (type == ACKS || type == REFUSALS || type == KEPT) {
                if (limit - p != (long) UUID_LENGTH * items) {
                    throw new DescriptorFormatException("acks", items + " uuids need " + UUID_LENGTH * items
                        + " bytes, found " + (limit - p));
                }
            } else if (type == DESCRIPTORS) {
                long q = p;
                for (int k = 0; k < items; k++) {
                    q += DescriptorCodec.recordLength(area, q, limit - q);
                }
                if (q != limit) {
                    throw new DescriptorFormatException("length", (limit - q) + " trailing bytes after " + items
                        + " descriptors");
                }
            } else {
                throw new DescriptorFormatException("type", "unknown message type " + type);
            }
            return from;
        }

        // The sender's name: the last one's String again when the bytes are the same (one sender, many messages).
        private String sender(int offset, int n) {
            if (!Arrays.equals(bytes, offset, offset + n, lastSenderBytes, 0, lastSenderBytes.length)) {
                String name = new String(bytes, offset, n, StandardCharsets.US_ASCII);
                if (!ShmNames.isEntity(name)) {
                    throw new DescriptorFormatException("sender", "not an entity name");
                }
                lastSender = name;
                lastSenderBytes = Arrays.copyOfRange(bytes, offset, offset + n);
            }
            return lastSender;
        }
    }
}
