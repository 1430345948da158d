package io.mstar.transport.conformance;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Writes hostile records into a live receiver's mailbox ring as a writer of this user could: a neighbour's bug or
 * malice, written by the test alone from docs/format.md (sections 6 to 9), never through the library's writer.
 *
 * <pre>
 *  0            RING          RING + 768                                       WRITERS            FILE
 *  +------------+-------------+-----------------+--------------+-------------+------------------+
 *  | records    | trailer     | u64 incarnation | u32 sleeping | pad to 64   | writer slots,    |
 *  |            | (positions) |                 | (doorbell)   |             | one byte each    |
 *  +------------+-------------+-----------------+--------------+-------------+------------------+
 *  record: i32 length (header included; a positive length, stored last with release, publishes it), i32 type,
 *          message, padded to 8
 * </pre>
 *
 * <p>Space is claimed as every writer claims it (a compare-and-swap on {@code tail}, a padding record where the
 * record would cross the end), so the forger may run beside live writers. Not thread-safe: one forger per test.
 */
final class RingForger implements AutoCloseable {
    static final long RING = 1 << 20;
    static final long TAIL = RING + 128;
    static final long HEAD_CACHE = RING + 256;
    static final long HEAD = RING + 384;
    static final long WRITERS = 1_049_408;
    static final int WRITER_SLOTS = 1024;
    static final long FILE = 1_050_432;
    static final int HEADER = 8;
    static final int PADDING = -1;
    static final int DESCRIPTORS = 1;
    static final int ACKS = 2;
    static final int MAGIC = 0x4454534D;

    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private final Arena arena = Arena.ofShared();
    private final MemorySegment file;

    RingForger(Path mailbox) throws IOException {
        long size = Files.size(mailbox);
        if (size != FILE) {
            throw new IllegalStateException("not a mailbox of this layout: path=" + mailbox + ", size=" + size);
        }
        try (FileChannel channel = FileChannel.open(mailbox, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            file = channel.map(FileChannel.MapMode.READ_WRITE, 0, FILE, arena);
        }
    }

    /** A record published as a writer publishes it: the receiver reads it as any other. */
    void published(int type, byte[] message) {
        int length = HEADER + message.length;
        long at = claim(length);
        INT.setRelease(file, at, -length);
        MemorySegment.copy(MemorySegment.ofArray(message), 0, file, at + HEADER, message.length);
        file.set(ValueLayout.JAVA_INT, at + 4, type);
        INT.setRelease(file, at, length);
    }

    /**
     * A record claimed and never published (its writer died between claiming and publishing): the length holds
     * {@code -length}, type and message are written. With {@code deadWriter}, a writer slot reads 1 and nobody
     * locks it, as a registered writer that died leaves it.
     */
    void stuckClaim(int type, byte[] message, boolean deadWriter) {
        if (deadWriter) {
            file.set(ValueLayout.JAVA_BYTE, WRITERS + WRITER_SLOTS - 1, (byte) 1);
        }
        int length = HEADER + message.length;
        long at = claim(length);
        INT.setRelease(file, at, -length);
        MemorySegment.copy(MemorySegment.ofArray(message), 0, file, at + HEADER, message.length);
        file.set(ValueLayout.JAVA_INT, at + 4, type);
    }

    /** {@code length} bytes claimed and left zero, the header too: what a writer killed right after its claim leaves. */
    void zeroFilled(int length) {
        claim(length);
    }

    /** Claims {@code align8(length)} bytes at the tail, after a padding record where they would cross the end. */
    private long claim(int length) {
        long required = (length + 7) & ~7L;
        if (required > RING / 8) {
            throw new IllegalArgumentException("a record of " + length + " bytes is longer than a ring allows");
        }
        while (true) {
            long tail = (long) LONG.getVolatile(file, TAIL);
            long head = (long) LONG.getVolatile(file, HEAD);
            long index = tail & (RING - 1);
            long padding = index + required > RING ? RING - index : 0;
            if (tail + padding + required - head > RING) {
                throw new IllegalStateException("the ring is full: tail=" + tail + ", head=" + head);
            }
            LONG.setRelease(file, HEAD_CACHE, head);
            if (LONG.compareAndSet(file, TAIL, tail, tail + padding + required)) {
                if (padding > 0) {
                    INT.setRelease(file, index, (int) -padding);
                    file.set(ValueLayout.JAVA_INT, index + 4, PADDING);
                    INT.setRelease(file, index, (int) padding);
                    return 0;
                }
                return index;
            }
        }
    }

    /** A message (section 8): u8 n, the sender, u16 count, then the items as given. */
    static byte[] message(String sender, int count, byte[]... items) {
        byte[] name = sender.getBytes(StandardCharsets.US_ASCII);
        int length = 1 + name.length + 2;
        for (byte[] item : items) {
            length += item.length;
        }
        ByteBuffer out = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        out.put((byte) name.length).put(name).putShort((short) count);
        for (byte[] item : items) {
            out.put(item);
        }
        return out.array();
    }

    /**
     * A descriptor record (section 9) with every field as given, {@code rank} written as the byte it is and
     * {@code shape} as its own length of dimensions; the declared length is what the fields use.
     */
    static byte[] descriptor(int dtype, int placement, int rank, long uuidMsb, long uuidLsb, long nbytes, long offset,
                             long[] shape, String requestId, String producer, String fileName) {
        byte[] id = requestId.getBytes(StandardCharsets.UTF_8);
        byte[] from = producer.getBytes(StandardCharsets.US_ASCII);
        byte[] name = fileName.getBytes(StandardCharsets.UTF_8);
        int length = 48 + 8 * shape.length + 6 + id.length + from.length + name.length;
        ByteBuffer out = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(MAGIC).putShort((short) 1).putShort((short) 0).putInt(length)
            .put((byte) dtype).put((byte) placement).put((byte) rank).put((byte) 0)
            .putLong(uuidMsb).putLong(uuidLsb).putLong(nbytes).putLong(offset);
        for (long dim : shape) {
            out.putLong(dim);
        }
        out.putShort((short) id.length).put(id).putShort((short) from.length).put(from)
            .putShort((short) name.length).put(name);
        return out.array();
    }

    @Override
    public void close() {
        arena.close();
    }
}
