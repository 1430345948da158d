package io.mstar.transport.codec;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.function.Consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

class DescriptorCodecTest {
    private static final Namespace NS = Namespace.of(null, "codec-test");
    private static final Namespace OTHER = Namespace.of(null, "another-deployment");
    /** A reader of the deployment {@link #NS} names. */
    private static final Deployment READER = ShmTestDir.deployment(Path.of("/dev/shm"), "codec-test", "reader");

    static TensorDescriptor randomDescriptor(SplittableRandom r, Namespace ns) {
        DType dtype = DType.values()[r.nextInt(DType.values().length)];
        long[] shape = new long[r.nextInt(DescriptorCodec.MAX_RANK + 1)];
        long elements = 1;
        for (int i = 0; i < shape.length; i++) {
            shape[i] = r.nextInt(6) == 0 ? 0 : 1 + r.nextInt(64);
            elements *= shape[i];
        }
        UUID uuid = new UUID(r.nextLong(), r.nextLong());
        boolean spill = r.nextBoolean();
        String entity = "e" + r.nextInt(1000);
        String file = spill ? ShmNames.spill(ns, entity, String.format("%08x", r.nextInt() & 0xffffffffL), uuid)
            : ShmNames.segment(ns, entity, String.format("%08x", r.nextInt() & 0xffffffffL), r.nextInt(40));
        String requestId = r.nextBoolean() ? "req-" + r.nextLong() : "ünïcödé-" + r.nextInt(100);
        return new TensorDescriptor(uuid, requestId, entity, dtype, shape, elements * dtype.itemBytes(),
            spill ? Placement.SPILL : Placement.ARENA, file, spill ? 0 : 256L * r.nextInt(1 << 20));
    }

    @Test
    void seededRoundTripsAndBatches() {
        SplittableRandom r = new SplittableRandom(99);
        MemorySegment batch = MemorySegment.ofArray(new byte[64 * DescriptorCodec.MAX_RECORD_BYTES]);
        for (int round = 0; round < 2_000; round++) {
            TensorDescriptor[] sent = new TensorDescriptor[1 + r.nextInt(64)];
            long used = 0;
            for (int i = 0; i < sent.length; i++) {
                sent[i] = randomDescriptor(r, NS);
                used += DescriptorCodec.encode(sent[i], batch, used);
            }
            long p = 0;
            for (TensorDescriptor expected : sent) {
                int length = DescriptorCodec.recordLength(batch, p, used - p);
                assertEquals(expected, DescriptorCodec.decode(batch, p, length, READER));
                p += length;
            }
            assertEquals(used, p);
        }
    }

    @Test
    void namesThatDifferInOneByteAnywhereDecodeAsThemselves() {
        // The decoder reuses the names it saw last, compared eight bytes at a time (the last word overlapping):
        // a name one byte away from a known one, at any position and length, must not pass for it.
        for (int length = 1; length <= 24; length++) {
            for (int at = 0; at < length; at++) {
                char[] base = new char[length];
                Arrays.fill(base, 'a');
                char[] other = base.clone();
                other[at] = 'b';
                for (String producer : new String[] {new String(base), new String(other), new String(base)}) {
                    TensorDescriptor d = new TensorDescriptor(UUID.randomUUID(), "r", producer, DType.U8, new long[] {1},
                        1, Placement.ARENA, ShmNames.segment(NS, producer, "0000000" + (at % 10), 1), 0);
                    TensorDescriptor back = DescriptorCodec.decode(DescriptorCodec.encode(d), READER);
                    assertEquals(producer, back.producer(), "length " + length + ", differing at " + at);
                    assertEquals(d.fileName(), back.fileName(), "length " + length + ", differing at " + at);
                }
            }
        }
    }

    @Test
    void eachBadFieldIsNamed() {
        TensorDescriptor good = new TensorDescriptor(UUID.randomUUID(), "r", "producer-1", DType.F32,
            new long[] {2, 3}, 24, Placement.ARENA, ShmNames.segment(NS, "producer-1", "0a0b0c0d", 3), 512);
        expectField("magic", good, b -> b.putInt(0, 0x12345678));
        expectField("version", good, b -> b.putShort(4, (short) 1)); // format 1 is refused, not misread
        expectField("reserved", good, b -> b.putShort(6, (short) 1));
        expectField("flags", good, b -> b.put(15, (byte) 2));
        expectField("length", good, b -> b.putInt(8, b.getInt(8) + 1));
        expectField("dtype", good, b -> b.put(12, (byte) 99));
        expectField("placement", good, b -> b.put(13, (byte) 7));
        expectField("rank", good, b -> b.put(14, (byte) 9));
        expectField("shape", good, b -> b.putLong(48, -1));
        expectField("shape", good, b -> {
            b.putLong(48, 1L << 40);
            b.putLong(56, 1L << 40);
        });
        expectField("nbytes", good, b -> b.putLong(32, 25));
        expectField("offset", good, b -> b.putLong(40, -256));
        expectField("offset", good, b -> b.putLong(40, Long.MAX_VALUE - 8));

        TensorDescriptor foreign = new TensorDescriptor(good.uuid(), "r", "producer-1", DType.F32, new long[] {2, 3},
            24, Placement.ARENA, ShmNames.segment(OTHER, "producer-1", "0a0b0c0d", 3), 512);
        assertEquals("fileName", assertThrows(DescriptorFormatException.class,
            () -> DescriptorCodec.decode(DescriptorCodec.encode(foreign), READER)).field());
        for (String hostile : new String[] {"../../etc/passwd", "mstar_" + NS.id() + "_arena_p_0a0b0c0d_1/x",
            "/dev/shm/mstar_" + NS.id() + "_arena_p_0a0b0c0d_1", "mstar_" + NS.id() + "_arena_.._0a0b0c0d_1"}) {
            TensorDescriptor d = new TensorDescriptor(good.uuid(), "r", "p", DType.U8, new long[] {1}, 1,
                Placement.ARENA, hostile, 0);
            DescriptorFormatException e = assertThrows(DescriptorFormatException.class,
                () -> DescriptorCodec.decode(DescriptorCodec.encode(d), READER), hostile);
            assertEquals("fileName", e.field());
        }
        TensorDescriptor wrongKind = new TensorDescriptor(good.uuid(), "r", "p", DType.U8, new long[] {1}, 1,
            Placement.SPILL, good.fileName(), 0);
        assertEquals("fileName", assertThrows(DescriptorFormatException.class,
            () -> DescriptorCodec.decode(DescriptorCodec.encode(wrongKind), READER)).field());
    }

    private static void expectField(String field, TensorDescriptor d, Consumer<ByteBuffer> corrupt) {
        byte[] bytes = DescriptorCodec.encode(d);
        corrupt.accept(ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN));
        DescriptorFormatException e = assertThrows(DescriptorFormatException.class,
            () -> DescriptorCodec.decode(bytes, READER));
        assertEquals(field, e.field(), e.getMessage());
    }

    /**
     * 10^5+ hostile inputs: truncations, bit flips and random bytes of valid records. Each one either
     * decodes to a descriptor that survives a round trip, or is refused with the typed exception.
     */
    @Test
    void truncatedFlippedAndRandomInputsDecodeOrAreRefused() {
        long seed = Long.getLong("fuzz.seed", System.nanoTime());
        SplittableRandom r = new SplittableRandom(seed);
        int decoded = 0;
        int refused = 0;
        for (int i = 0; i < 120_000; i++) {
            byte[] input = DescriptorCodec.encode(randomDescriptor(r, NS));
            switch (i % 4) {
                case 0 -> input = Arrays.copyOf(input, r.nextInt(input.length));
                case 1 -> {
                    for (int flips = 1 + r.nextInt(3); flips > 0; flips--) {
                        input[r.nextInt(input.length)] ^= (byte) (1 << r.nextInt(8));
                    }
                }
                case 2 -> {
                    byte[] random = new byte[r.nextInt(DescriptorCodec.MAX_RECORD_BYTES + 64)];
                    r.nextBytes(random);
                    input = random;
                }
                default -> {
                    // A plausible header over random fields, so decoding gets past the magic.
                    for (int b = 12; b < input.length; b++) {
                        if (r.nextInt(8) == 0) {
                            input[b] = (byte) r.nextInt();
                        }
                    }
                }
            }
            try {
                TensorDescriptor d = DescriptorCodec.decode(input, READER);
                assertEquals(d, DescriptorCodec.decode(DescriptorCodec.encode(d), READER));
                decoded++;
            } catch (DescriptorFormatException e) {
                assertTrue(e.field() != null && !e.field().isEmpty());
                refused++;
            } catch (Throwable t) {
                fail("input " + i + " escaped with " + t + " (seed=" + seed + ", rerun with -Dfuzz.seed=" + seed + ")", t);
            }
        }
        assertTrue(refused > 50_000 && decoded > 100, "decoded=" + decoded + ", refused=" + refused);
    }
}
