package io.mstar.transport.remote;

import io.mstar.transport.DType;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The messages of the cross-node path, each one Aeron message on the receiving entity's stream. A tensor
 * is a START, one or more DATA chunks in order, and an END; the receiver answers LANDED on the sender's
 * stream once the tensor is whole in its arena. Little-endian; every message starts with its type.
 *
 * <pre>
 *   START  (40 + 8 x rank + names): type 1 | rank u8 | dtype u8 | pad | uuid msb, lsb | nbytes
 *          | 4 x u16 lengths (from, to, requestId, reply endpoint) | shape (rank x i64) | the four strings
 *   DATA   (32 + payload):          type 2 | pad | uuid msb, lsb | offset of the payload in the tensor | payload
 *   END    (36):                    type 3 | pad | uuid msb, lsb | nbytes | CRC32C of the tensor (i32)
 *   LANDED (28 + consumer):         type 4 | pad | uuid msb, lsb | u16 length | pad | the consumer's name
 * </pre>
 *
 * A DATA message larger than the MTU reaches the receiver in fragments: only the first carries the
 * header, the rest are payload, which the receiver copies on at the running offset.
 */
final class RemoteProtocol {
    static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;
    static final int START = 1;
    static final int DATA = 2;
    static final int END = 3;
    static final int LANDED = 4;

    static final int TYPE = 0;
    static final int RANK = 4;
    static final int DTYPE = 5;
    static final int UUID_MSB = 8;
    static final int UUID_LSB = 16;
    static final int NBYTES = 24;
    static final int START_LENGTHS = 32;
    static final int START_SHAPE = 40;
    static final int DATA_OFFSET = 24;
    static final int DATA_HEADER = 32;
    static final int END_CRC = 32;
    static final int END_LENGTH = 36;
    static final int LANDED_NAME_LENGTH = 24;
    static final int LANDED_NAME = 28;

    private RemoteProtocol() {
    }

    /** The metadata of a tensor, from its START message. */
    record Start(long msb, long lsb, long nbytes, DType dtype, long[] shape, String from, String to,
                 String requestId, String replyTo) {
    }

    static int writeStart(MutableDirectBuffer b, long msb, long lsb, long nbytes, DType dtype, long[] shape,
                          String from, String to, String requestId, String replyTo) {
        b.putInt(TYPE, START, ORDER);
        b.putByte(RANK, (byte) shape.length);
        b.putByte(DTYPE, (byte) dtype.code());
        putUuid(b, msb, lsb);
        b.putLong(NBYTES, nbytes, ORDER);
        int at = START_SHAPE;
        for (long dim : shape) {
            b.putLong(at, dim, ORDER);
            at += Long.BYTES;
        }
        String[] names = {from, to, requestId, replyTo};
        for (int i = 0; i < names.length; i++) {
            byte[] bytes = names[i].getBytes(StandardCharsets.UTF_8);
            b.putShort(START_LENGTHS + 2 * i, (short) bytes.length, ORDER);
            b.putBytes(at, bytes);
            at += bytes.length;
        }
        return at;
    }

    /** Reads a START message; throws {@link IllegalArgumentException} naming what does not fit. */
    static Start readStart(DirectBuffer b, int offset, int length) {
        int rank = b.getByte(offset + RANK) & 0xff;
        DType dtype = DType.ofCode(b.getByte(offset + DTYPE) & 0xff);
        if (dtype == null) {
            throw new IllegalArgumentException("unknown dtype code " + (b.getByte(offset + DTYPE) & 0xff));
        }
        long[] shape = new long[rank];
        int at = offset + START_SHAPE;
        for (int i = 0; i < rank; i++) {
            shape[i] = b.getLong(at, ORDER);
            at += Long.BYTES;
        }
        String[] names = new String[4];
        for (int i = 0; i < names.length; i++) {
            int n = b.getShort(offset + START_LENGTHS + 2 * i, ORDER) & 0xffff;
            if (at + n > offset + length) {
                throw new IllegalArgumentException("START message shorter than its names: " + length + " bytes");
            }
            names[i] = b.getStringWithoutLengthUtf8(at, n);
            at += n;
        }
        return new Start(msb(b, offset), lsb(b, offset), b.getLong(offset + NBYTES, ORDER), dtype, shape, names[0],
            names[1], names[2], names[3]);
    }

    static void writeDataHeader(MutableDirectBuffer b, long msb, long lsb, long offset) {
        b.putInt(TYPE, DATA, ORDER);
        putUuid(b, msb, lsb);
        b.putLong(DATA_OFFSET, offset, ORDER);
    }

    static void writeEnd(MutableDirectBuffer b, long msb, long lsb, long nbytes, int crc) {
        b.putInt(TYPE, END, ORDER);
        putUuid(b, msb, lsb);
        b.putLong(NBYTES, nbytes, ORDER);
        b.putInt(END_CRC, crc, ORDER);
    }

    static int writeLanded(MutableDirectBuffer b, long msb, long lsb, byte[] consumer) {
        b.putInt(TYPE, LANDED, ORDER);
        putUuid(b, msb, lsb);
        b.putShort(LANDED_NAME_LENGTH, (short) consumer.length, ORDER);
        b.putBytes(LANDED_NAME, consumer);
        return LANDED_NAME + consumer.length;
    }

    static String landedConsumer(DirectBuffer b, int offset) {
        return b.getStringWithoutLengthUtf8(offset + LANDED_NAME, b.getShort(offset + LANDED_NAME_LENGTH, ORDER) & 0xffff);
    }

    static int type(DirectBuffer b, int offset) {
        return b.getInt(offset + TYPE, ORDER);
    }

    static long msb(DirectBuffer b, int offset) {
        return b.getLong(offset + UUID_MSB, ORDER);
    }

    static long lsb(DirectBuffer b, int offset) {
        return b.getLong(offset + UUID_LSB, ORDER);
    }

    private static void putUuid(MutableDirectBuffer b, long msb, long lsb) {
        b.putLong(UUID_MSB, msb, ORDER);
        b.putLong(UUID_LSB, lsb, ORDER);
    }
}
