package io.mstar.transport.remote;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.naming.ShmNames;
import io.netty.buffer.ByteBuf;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The frames of the cross-node path on one TCP connection. Every frame is a little-endian {@code u32}
 * length (of what follows it) and a type byte; a TENSOR frame is followed by the tensor's bytes, raw.
 *
 * <pre>
 *   HELLO     client: magic u32 | version u8 | nonce (32) | u8 length | the client's entity
 *   CHALLENGE server: nonce (32) | u8 length | the server's entity
 *   PROOF     client: HMAC-SHA256 (32) over both nonces and both names ({@link Handshake})
 *   WELCOME   server: its own HMAC-SHA256 (32)
 *   TENSOR    uuid msb, lsb | first uuid msb, lsb | nbytes i64 | CRC32C of the bytes i32 | dtype u8 | rank u8
 *             | u16 length | shape (rank x i64) | request id (UTF-8); then nbytes bytes. The first uuid is the
 *             one the tensor was first sent under: its own, or an in-doubt tensor's that it repeats
 *             ({@link DuplicateWindow})
 *   LANDED    uuid msb, lsb: the tensor is whole in the receiver's arena
 *   REFUSED   uuid msb, lsb | reason u8: the receiver dropped it ({@link Refusal})
 * </pre>
 *
 * Nothing here is believed before it is checked: a length before the frame is read, each field before it
 * is used ({@link #readTensor}).
 */
final class RemoteProtocol {
    static final int HELLO = 1;
    static final int CHALLENGE = 2;
    static final int PROOF = 3;
    static final int WELCOME = 4;
    static final int TENSOR = 5;
    static final int LANDED = 6;
    static final int REFUSED = 7;

    static final int MAGIC = 0x4E54534D; // "MSTN" read little-endian
    static final int VERSION = 2; // 2: TENSOR carries the first uuid
    static final int NONCE_BYTES = 32;
    static final int MAC_BYTES = 32;
    static final int LENGTH_FIELD = 4;
    /** A TENSOR frame without shape and request id: type, uuid, first uuid, nbytes, crc, dtype, rank, id length. */
    static final int TENSOR_FIXED = 1 + 16 + 16 + 8 + 4 + 1 + 1 + 2;
    /** The largest frame of any type (a TENSOR frame at the codec's limits). */
    static final int MAX_FRAME = TENSOR_FIXED + 8 * DescriptorCodec.MAX_RANK + DescriptorCodec.MAX_REQUEST_ID_BYTES;
    static final int UUID_FRAME = 1 + 16;

    private RemoteProtocol() {
    }

    /** Why a receiver dropped a tensor; the sender reports it with its own words, never the peer's. */
    enum Refusal {
        NO_ROOM("the receiving node's arena had no room for it"),
        CORRUPTED("its bytes did not match its CRC32C on arrival"),
        TOO_LARGE("it is larger than the receiving node lets one sender hold (MSTAR_REMOTE_MAX_INFLIGHT_MB there)"),
        NOT_THE_FIRST("a tensor of other bytes landed under the uuid it names as its first send: not a repeat of it");

        final String text;

        Refusal(String text) {
            this.text = text;
        }

        static Refusal of(int code) {
            return code >= 1 && code <= values().length ? values()[code - 1] : null;
        }

        int code() {
            return ordinal() + 1;
        }
    }

    /** The peer broke the protocol: its connection is closed and counted. */
    static final class Violation extends RuntimeException {
        Violation(String message) {
            super(message, null, false, false);
        }
    }

    /** The header of a tensor on its way, checked ({@link #readTensor}). */
    record TensorHeader(long msb, long lsb, long firstMsb, long firstLsb, long nbytes, int crc, DType dtype,
                        long[] shape, String requestId) {
    }

    /**
     * The length of the frame at {@code in}'s reader index, or -1 when its length field has not arrived.
     *
     * @throws Violation when the length is outside 1 to {@code max}
     */
    static int frameLength(ByteBuf in, int max) {
        if (in.readableBytes() < LENGTH_FIELD) {
            return -1;
        }
        int length = in.getIntLE(in.readerIndex());
        if (length < 1 || length > max) {
            throw new Violation("a frame of " + Integer.toUnsignedString(length) + " bytes (at most " + max + ")");
        }
        return length;
    }

    /** Whether the whole frame of {@code length} is readable. */
    static boolean whole(ByteBuf in, int length) {
        return in.readableBytes() >= LENGTH_FIELD + length;
    }

    static void writeHello(ByteBuf out, byte[] nonce, byte[] entity) {
        out.writeIntLE(1 + 4 + 1 + NONCE_BYTES + 1 + entity.length).writeByte(HELLO).writeIntLE(MAGIC).writeByte(VERSION)
            .writeBytes(nonce).writeByte(entity.length).writeBytes(entity);
    }

    static void writeChallenge(ByteBuf out, byte[] nonce, byte[] entity) {
        out.writeIntLE(1 + NONCE_BYTES + 1 + entity.length).writeByte(CHALLENGE).writeBytes(nonce)
            .writeByte(entity.length).writeBytes(entity);
    }

    static void writeMac(ByteBuf out, int type, byte[] mac) {
        out.writeIntLE(1 + MAC_BYTES).writeByte(type).writeBytes(mac);
    }

    /** A handshake frame's parts: the peer's nonce and entity (HELLO, CHALLENGE) or its MAC. */
    record Greeting(byte[] nonce, String entity) {
    }

    /**
     * Reads a whole HELLO ({@code hello} true) or CHALLENGE frame of {@code length}.
     *
     * @throws Violation when it is another frame, or any field is wrong
     */
    static Greeting readGreeting(ByteBuf in, int length, boolean hello) {
        int fixed = 1 + (hello ? 5 : 0) + NONCE_BYTES + 1;
        if (length < fixed + 1) {
            throw new Violation("a handshake frame of " + length + " bytes");
        }
        in.skipBytes(LENGTH_FIELD);
        int type = in.readUnsignedByte();
        if (type != (hello ? HELLO : CHALLENGE)) {
            throw new Violation("frame type " + type + " where " + (hello ? "HELLO" : "CHALLENGE") + " was due");
        }
        if (hello && (in.readIntLE() != MAGIC | in.readUnsignedByte() != VERSION)) {
            throw new Violation("not this protocol, or another version of it");
        }
        byte[] nonce = new byte[NONCE_BYTES];
        in.readBytes(nonce);
        int n = in.readUnsignedByte();
        if (n != length - fixed) {
            throw new Violation("an entity name of " + n + " bytes in a frame with room for " + (length - fixed));
        }
        String entity = in.readCharSequence(n, StandardCharsets.US_ASCII).toString(); // checked next
        if (!ShmNames.isEntity(entity)) {
            throw new Violation("an entity name that is not one (letters, digits, '_', '-', '.'; 1 to 64)");
        }
        return new Greeting(nonce, entity);
    }

    /** Reads a whole PROOF or WELCOME frame's MAC. */
    static byte[] readMac(ByteBuf in, int length, int type) {
        if (length != 1 + MAC_BYTES) {
            throw new Violation("a proof frame of " + length + " bytes");
        }
        in.skipBytes(LENGTH_FIELD);
        if (in.readUnsignedByte() != type) {
            throw new Violation("another frame where a proof was due");
        }
        byte[] mac = new byte[MAC_BYTES];
        in.readBytes(mac);
        return mac;
    }

    static void writeTensor(ByteBuf out, long msb, long lsb, long firstMsb, long firstLsb, long nbytes, int crc,
                            DType dtype, long[] shape, byte[] requestId) {
        out.writeIntLE(TENSOR_FIXED + 8 * shape.length + requestId.length).writeByte(TENSOR).writeLongLE(msb)
            .writeLongLE(lsb).writeLongLE(firstMsb).writeLongLE(firstLsb).writeLongLE(nbytes).writeIntLE(crc)
            .writeByte(dtype.code()).writeByte(shape.length).writeShortLE(requestId.length);
        for (long dim : shape) {
            out.writeLongLE(dim);
        }
        out.writeBytes(requestId);
    }

    /**
     * Reads a whole TENSOR frame of {@code length}, each field checked as the local codec checks a descriptor:
     * rank and request id within the codec's limits, the frame exactly as long as they say, a known dtype,
     * no negative dimension, nbytes equal to the shape's size, the request id valid UTF-8.
     *
     * @throws Violation naming the first field that fails
     */
    static TensorHeader readTensor(ByteBuf in, int length) {
        if (length < TENSOR_FIXED) {
            throw new Violation("a TENSOR frame of " + length + " bytes, shorter than its fixed " + TENSOR_FIXED);
        }
        in.skipBytes(LENGTH_FIELD + 1);
        long msb = in.readLongLE();
        long lsb = in.readLongLE();
        long firstMsb = in.readLongLE();
        long firstLsb = in.readLongLE();
        long nbytes = in.readLongLE();
        int crc = in.readIntLE();
        int code = in.readUnsignedByte();
        int rank = in.readUnsignedByte();
        int idLength = in.readUnsignedShortLE();
        if (rank > DescriptorCodec.MAX_RANK || idLength > DescriptorCodec.MAX_REQUEST_ID_BYTES) {
            throw new Violation("rank " + rank + " or a request id of " + idLength + " bytes (limits "
                + DescriptorCodec.MAX_RANK + ", " + DescriptorCodec.MAX_REQUEST_ID_BYTES + ")");
        }
        if (length != TENSOR_FIXED + 8 * rank + idLength) {
            throw new Violation("a TENSOR frame of " + length + " bytes for rank " + rank + " and an id of " + idLength);
        }
        DType dtype = DType.ofCode(code);
        if (dtype == null) {
            throw new Violation("unknown dtype code " + code);
        }
        long[] shape = new long[rank];
        for (int i = 0; i < rank; i++) {
            shape[i] = in.readLongLE();
        }
        long size;
        try {
            size = Tensor.byteSize(dtype, shape);
        } catch (ArithmeticException | IllegalArgumentException e) {
            throw new Violation("shape " + Arrays.toString(shape) + ": " + e.getMessage());
        }
        if (size != nbytes) {
            throw new Violation("nbytes " + nbytes + " where dtype " + dtype + " and shape " + Arrays.toString(shape)
                + " make " + size);
        }
        String requestId = utf8(in, idLength);
        if (requestId == null) {
            throw new Violation("a request id that is not UTF-8");
        }
        return new TensorHeader(msb, lsb, firstMsb, firstLsb, nbytes, crc, dtype, shape, requestId);
    }

    static void writeLanded(ByteBuf out, long msb, long lsb) {
        out.writeIntLE(UUID_FRAME).writeByte(LANDED).writeLongLE(msb).writeLongLE(lsb);
    }

    static void writeRefused(ByteBuf out, long msb, long lsb, Refusal reason) {
        out.writeIntLE(UUID_FRAME + 1).writeByte(REFUSED).writeLongLE(msb).writeLongLE(lsb).writeByte(reason.code());
    }

    private static String utf8(ByteBuf in, int n) {
        byte[] bytes = new byte[n];
        in.readBytes(bytes);
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }
}
