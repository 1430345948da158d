package io.mstar.transport.channel;

import io.mstar.transport.Deployment;
import io.mstar.transport.DescriptorFormatException;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.lifecycle.ShmNames;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * The layout of one message in a mailbox's ring, and its validation on the way out. The ring's record
 * type says what the message carries.
 *
 * <pre>
 *   message (little-endian), type 1 = descriptors, 2 = ACKs:
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
    /** Bytes of one ACK. */
    static final int UUID_LENGTH = 16;
    private static final int MAX_ENTITY_LENGTH = 64;

    private MailboxMessage() {
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
     * Decodes a message and hands it to the listener.
     *
     * @throws DescriptorFormatException naming what does not decode; the listener is not called then
     */
    static void dispatch(int type, byte[] bytes, Deployment reader, TensorChannel.Listener listener) {
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        int n = Byte.toUnsignedInt(in.get());
        if (n == 0 || n > MAX_ENTITY_LENGTH || in.remaining() < n + 2) {
            throw new DescriptorFormatException("sender", "bad sender name length " + n);
        }
        byte[] name = new byte[n];
        in.get(name);
        String from = new String(name, StandardCharsets.US_ASCII);
        if (!ShmNames.isEntity(from)) {
            throw new DescriptorFormatException("sender", "not an entity name");
        }
        int count = Short.toUnsignedInt(in.getShort());
        if (type == ACKS) {
            if (in.remaining() != UUID_LENGTH * count) {
                throw new DescriptorFormatException("acks", count + " uuids need " + UUID_LENGTH * count + " bytes, found "
                    + in.remaining());
            }
            List<UUID> uuids = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                uuids.add(new UUID(in.getLong(), in.getLong()));
            }
            listener.acks(from, uuids);
        } else if (type == DESCRIPTORS) {
            MemorySegment records = MemorySegment.ofArray(bytes);
            long p = in.position();
            List<TensorDescriptor> descriptors = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                int length = DescriptorCodec.recordLength(records, p, bytes.length - p);
                descriptors.add(DescriptorCodec.decode(records, p, length, reader));
                p += length;
            }
            if (p != bytes.length) {
                throw new DescriptorFormatException("length", (bytes.length - p) + " trailing bytes after " + count + " descriptors");
            }
            listener.descriptors(from, descriptors);
        } else {
            throw new DescriptorFormatException("type", "unknown message type " + type);
        }
    }
}
