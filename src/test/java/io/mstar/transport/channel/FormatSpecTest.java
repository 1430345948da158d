package io.mstar.transport.channel;

import io.mstar.transport.DType;
import io.mstar.transport.Placement;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.shm.SlotStamp;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code docs/format.md} against the code: every golden block of the specification (the bytes of a descriptor
 * record, of each message, of a ring record and its trailer, of a slot stamp; the mailbox file's offsets; a
 * namespace) must be what the code writes, so the format cannot change without the document (and the Python
 * side, which checks the same blocks) changing with it.
 */
class FormatSpecTest {
    static final Path SPEC = Path.of("docs/format.md");
    // A golden block: <!-- golden: name --> then a fenced block of hex bytes or name=value lines.
    private static final Pattern GOLDEN = Pattern.compile("<!-- golden: ([a-z-]+) -->\\s*```[a-z]*\\n(.*?)```",
        Pattern.DOTALL);

    static final UUID UUID_1 = new UUID(0x0123456789abcdefL, 0xfedcba9876543210L);
    static final UUID UUID_2 = new UUID(0x1111111111111111L, 0x2222222222222222L);
    static final String NS = Namespace.of("token", "ipc:///tmp/mstar.sock").id();

    /** The golden blocks of the specification, by name. */
    static Map<String, String> goldenBlocks() throws IOException {
        Map<String, String> blocks = new LinkedHashMap<>();
        Matcher m = GOLDEN.matcher(Files.readString(SPEC));
        while (m.find()) {
            blocks.put(m.group(1), m.group(2).strip());
        }
        return blocks;
    }

    private static byte[] hex(String block) {
        return HexFormat.of().parseHex(block.replaceAll("(?m)#.*$", "").replaceAll("\\s+", ""));
    }

    private static String dump(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < bytes.length; i += 16) {
            out.append(HexFormat.ofDelimiter(" ").formatHex(bytes, i, Math.min(bytes.length, i + 16))).append('\n');
        }
        return out.toString();
    }

    private static void assertGolden(Map<String, String> blocks, String name, byte[] written) {
        assertTrue(blocks.containsKey(name), SPEC + " has no golden block " + name + "; the code writes:\n" + dump(written));
        assertEquals(dump(hex(blocks.get(name))), dump(written), SPEC + " golden block " + name
            + " is not what the code writes");
    }

    static TensorDescriptor descriptor() {
        return new TensorDescriptor(UUID_1, "req-7", "prefill", DType.F16, new long[] {2, 3}, 12, Placement.ARENA,
            ShmNames.segment(new Namespace(NS), "prefill", "0a1b2c3d", 0), 4096);
    }

    static byte[] descriptorsMessage() {
        ByteBuffer message = ByteBuffer.allocate(512).order(ByteOrder.LITTLE_ENDIAN);
        byte[] sender = "prefill".getBytes(StandardCharsets.US_ASCII);
        MailboxMessage.start(message, sender);
        byte[] record = DescriptorCodec.encode(descriptor());
        message.put(record);
        MailboxMessage.finish(message, sender.length, 1);
        return java.util.Arrays.copyOf(message.array(), message.position());
    }

    static byte[] acksMessage() {
        ByteBuffer message = ByteBuffer.allocate(512).order(ByteOrder.LITTLE_ENDIAN);
        byte[] sender = "decode".getBytes(StandardCharsets.US_ASCII);
        MailboxMessage.start(message, sender);
        for (UUID u : List.of(UUID_1, UUID_2)) {
            message.putLong(u.getMostSignificantBits()).putLong(u.getLeastSignificantBits());
        }
        MailboxMessage.finish(message, sender.length, 2);
        return java.util.Arrays.copyOf(message.array(), message.position());
    }

    @Test
    void theDescriptorRecordIsTheSpecifications() throws IOException {
        assertGolden(goldenBlocks(), "descriptor-record", DescriptorCodec.encode(descriptor()));
        assertEquals(DescriptorCodec.VERSION, Integer.parseInt(values(goldenBlocks().get("versions")).get("descriptor")));
        assertEquals(MailboxDescriptor.VERSION, Integer.parseInt(values(goldenBlocks().get("versions")).get("mailbox")));
    }

    @Test
    void eachMessageIsTheSpecifications() throws IOException {
        Map<String, String> blocks = goldenBlocks();
        assertGolden(blocks, "descriptors-message", descriptorsMessage());
        assertGolden(blocks, "acks-message", acksMessage());
    }

    /** A message as Agrona's many-to-one ring lays it down: record header, body, and the trailer's tail. */
    @Test
    void aRingRecordAndTheTrailerAreTheSpecifications() throws IOException {
        int capacity = 1024;
        UnsafeBuffer buffer = new UnsafeBuffer(new byte[capacity + RingBufferDescriptor.TRAILER_LENGTH]);
        ManyToOneRingBuffer ring = new ManyToOneRingBuffer(buffer);
        byte[] message = acksMessage();
        assertTrue(ring.write(MailboxMessage.ACKS, new UnsafeBuffer(message), 0, message.length));
        byte[] record = new byte[8 + ((message.length + 7) & ~7)];
        buffer.getBytes(0, record);
        assertGolden(goldenBlocks(), "ring-record", record);
        Map<String, String> trailer = values(goldenBlocks().get("ring-trailer"));
        assertEquals(RingBufferDescriptor.TAIL_POSITION_OFFSET, Integer.parseInt(trailer.get("tail")));
        assertEquals(RingBufferDescriptor.HEAD_CACHE_POSITION_OFFSET, Integer.parseInt(trailer.get("head-cache")));
        assertEquals(RingBufferDescriptor.HEAD_POSITION_OFFSET, Integer.parseInt(trailer.get("head")));
        assertEquals(RingBufferDescriptor.CORRELATION_COUNTER_OFFSET, Integer.parseInt(trailer.get("correlation")));
        assertEquals(RingBufferDescriptor.CONSUMER_HEARTBEAT_OFFSET, Integer.parseInt(trailer.get("heartbeat")));
        assertEquals(RingBufferDescriptor.TRAILER_LENGTH, Integer.parseInt(trailer.get("length")));
        assertEquals(record.length, buffer.getLong(capacity + RingBufferDescriptor.TAIL_POSITION_OFFSET),
            "the tail moves by the aligned record");
    }

    @Test
    void theMailboxFilesLayoutIsTheSpecifications() throws IOException {
        Map<String, String> layout = values(goldenBlocks().get("mailbox-file"));
        assertEquals(MailboxDescriptor.RING_BYTES, Integer.parseInt(layout.get("ring")));
        assertEquals(MailboxDescriptor.INCARNATION_OFFSET, Integer.parseInt(layout.get("incarnation")));
        assertEquals(MailboxDescriptor.SLEEPING_OFFSET, Integer.parseInt(layout.get("sleeping")));
        assertEquals(MailboxDescriptor.WRITERS_OFFSET, Integer.parseInt(layout.get("writers")));
        assertEquals(MailboxDescriptor.WRITERS, Integer.parseInt(layout.get("writer-slots")));
        assertEquals(MailboxDescriptor.FILE_BYTES, Integer.parseInt(layout.get("file")));
        assertEquals(MailboxMessage.DESCRIPTORS, Integer.parseInt(layout.get("type-descriptors")));
        assertEquals(MailboxMessage.ACKS, Integer.parseInt(layout.get("type-acks")));
        assertEquals(MailboxMessage.REFUSALS, Integer.parseInt(layout.get("type-refusals")));
        assertEquals(MailboxMessage.KEPT, Integer.parseInt(layout.get("type-kept")));
        assertEquals(DescriptorCodec.FLAG_POSITION, Integer.parseInt(layout.get("flag-position")));
        assertEquals(MailboxDescriptor.HANDLED_OFFSET, Integer.parseInt(layout.get("handled")));
        assertEquals(MailboxDescriptor.VERSION_OFFSET, Integer.parseInt(layout.get("version")));
    }

    @Test
    void theSlotStampIsTheSpecifications() throws IOException {
        MemorySegment slot = MemorySegment.ofArray(new byte[(int) SlotStamp.slotBytes(13)]);
        slot.asSlice(0, 13).fill((byte) 0xAA);
        SlotStamp.write(slot, 0, 13, UUID_1.getMostSignificantBits(), UUID_1.getLeastSignificantBits());
        assertGolden(goldenBlocks(), "slot-stamp", slot.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
    }

    @Test
    void theNamesAreTheSpecifications() throws IOException {
        Map<String, String> names = values(goldenBlocks().get("names"));
        Namespace ns = new Namespace(NS);
        assertEquals(names.get("namespace"), NS);
        assertEquals(names.get("namespace-without-token"), Namespace.of(null, "/tmp/mstar.sock").id());
        assertEquals(names.get("segment"), ShmNames.segment(ns, "prefill", "0a1b2c3d", 0));
        assertEquals(names.get("spill"), ShmNames.spill(ns, "prefill", "0a1b2c3d", UUID_1));
        assertEquals(names.get("mailbox"), ShmNames.mailbox(ns, "decode"));
        assertEquals(names.get("stats"), ShmNames.stats(ns, "prefill", "0a1b2c3d"));
        assertEquals(names.get("budget"), ShmNames.budget(ns));
    }

    /** Every golden block of the specification is checked here: a new one needs its check. */
    @Test
    void everyGoldenBlockIsChecked() throws IOException {
        assertEquals(List.of("versions", "names", "slot-stamp", "mailbox-file", "ring-trailer", "ring-record",
            "descriptors-message", "acks-message", "descriptor-record"), new ArrayList<>(goldenBlocks().keySet()));
    }

    // name=value lines.
    private static Map<String, String> values(String block) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String line : block.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                out.put(line.substring(0, eq).strip(), line.substring(eq + 1).strip());
            }
        }
        return out;
    }
}
