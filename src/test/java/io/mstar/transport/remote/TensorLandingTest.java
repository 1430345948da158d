package io.mstar.transport.remote;

import io.aeron.logbuffer.FrameDescriptor;
import io.aeron.logbuffer.Header;
import io.aeron.protocol.DataHeaderFlyweight;
import io.aeron.protocol.HeaderFlyweight;
import io.mstar.transport.DType;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.Deployment;
import io.mstar.transport.testing.ShmTestDir;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The receiving side fed Aeron fragments by hand, as a sender's image delivers them: a whole tensor lands
 * (across fragmented chunks) and is delivered intact; a torn one (cut off, with a gap, short, with a wrong
 * checksum, its sender gone) is aborted, its slot freed, and never delivered.
 */
class TensorLandingTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private static final int SESSION = 7;
    private static final int SIZE = 10_000;
    private TensorTransport arena;
    private TensorLanding landing;
    private final RemoteCounters counters = new RemoteCounters();
    private final List<TensorDescriptor> delivered = new ArrayList<>();
    private final byte[] tensor = new byte[SIZE];
    private final Header header = new Header(0, 0);
    private final UnsafeBuffer frame = new UnsafeBuffer(ByteBuffer.allocateDirect(64 * 1024));
    private final UnsafeBuffer message = new UnsafeBuffer(ByteBuffer.allocateDirect(4096));
    private long msb = 1;

    @BeforeEach
    void open() {
        Deployment deployment = Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "16")::get), "pipe", "decode");
        arena = TensorTransports.create(deployment, false);
        landing = new TensorLanding(arena, "decode", new TensorLanding.Events() {
            @Override
            public void landed(RemoteProtocol.Start start, TensorDescriptor descriptor) {
                delivered.add(descriptor);
            }

            @Override
            public void confirmed(String consumer, long m, long l) {
            }
        }, counters);
        for (int i = 0; i < SIZE; i++) {
            tensor[i] = (byte) (i * 7 + 3);
        }
    }

    @AfterEach
    void close() {
        landing.close();
        arena.close();
    }

    @Test
    void aWholeTensorLandsIntactAcrossFragmentedChunks() {
        start("decode");
        data(0, 4000, 3); // one chunk in three fragments
        data(4000, 6000, 1);
        end(SIZE, crc(tensor));
        assertEquals(1, delivered.size());
        assertIntact(delivered.getFirst());
        assertEquals(0, counters.aborted.get());
        arena.ack(List.of(delivered.getFirst().uuid()));
        assertEquals(0, arena.statsSummary().inFlight());
    }

    @Test
    void aTensorCutOffByTheNextOneIsAbortedAndTheNextLands() {
        start("decode");
        data(0, 4000, 2);
        msb++;
        start("decode");
        data(0, SIZE, 4);
        end(SIZE, crc(tensor));
        assertEquals(1, delivered.size());
        assertIntact(delivered.getFirst());
        assertEquals(1, counters.aborted.get());
        arena.ack(List.of(delivered.getFirst().uuid()));
        assertEquals(0, arena.statsSummary().inFlight(), "the torn tensor's room was freed");
    }

    @Test
    void aGapAShortTensorAndAWrongChecksumAreNeverDelivered() {
        start("decode");
        data(0, 4000, 1);
        data(5000, 5000, 1); // a gap
        start("decode");
        data(0, 4000, 1);
        end(SIZE, crc(java.util.Arrays.copyOf(tensor, 4000))); // short, the checksum of what came
        start("decode");
        data(0, SIZE, 2);
        end(SIZE, crc(tensor) ^ 1); // corrupted
        assertEquals(List.of(), delivered);
        assertEquals(3, counters.aborted.get());
        assertEquals(0, arena.statsSummary().inFlight());
    }

    @Test
    void aTensorWhoseSenderWentAwayIsAbortedAndOneForAnotherEntityDropped() {
        start("prefill");
        data(0, SIZE, 1);
        end(SIZE, crc(tensor));
        assertEquals(1, counters.misrouted.get());
        start("decode");
        data(0, 4000, 1);
        landing.abortOrphans(session -> session != SESSION); // its image is gone
        assertEquals(List.of(), delivered);
        assertEquals(1, counters.aborted.get());
        assertEquals(0, arena.statsSummary().inFlight());
    }

    private void assertIntact(TensorDescriptor d) {
        try (ReceivedTensor t = arena.receive(d)) {
            assertTrue(MemorySegment.mismatch(t.data(), 0, SIZE, MemorySegment.ofArray(tensor), 0, SIZE) < 0,
                "the landed bytes differ");
        }
    }

    private static int crc(byte[] bytes) {
        CRC32C crc = new CRC32C();
        crc.update(bytes);
        return (int) crc.getValue();
    }

    private void start(String to) {
        int length = RemoteProtocol.writeStart(message, msb, 2, SIZE, DType.U8, new long[] {SIZE}, "prefill", to, "r",
            "127.0.0.1:1");
        fragment(message, 0, length, FrameDescriptor.UNFRAGMENTED);
    }

    // One DATA message of tensor bytes [from, from + n), delivered in {@code fragments} fragments.
    private void data(int from, int n, int fragments) {
        UnsafeBuffer whole = new UnsafeBuffer(new byte[RemoteProtocol.DATA_HEADER + n]);
        UnsafeBuffer head = new UnsafeBuffer(whole.byteArray());
        RemoteProtocol.writeDataHeader(head, msb, 2, from);
        whole.putBytes(RemoteProtocol.DATA_HEADER, tensor, from, n);
        int total = whole.capacity();
        int step = (total + fragments - 1) / fragments;
        for (int at = 0; at < total; at += step) {
            int len = Math.min(step, total - at);
            byte flags = (byte) ((at == 0 ? FrameDescriptor.BEGIN_FRAG_FLAG : 0)
                | (at + len == total ? FrameDescriptor.END_FRAG_FLAG : 0));
            fragment(whole, at, len, flags);
        }
    }

    private void end(long nbytes, int crc) {
        RemoteProtocol.writeEnd(message, msb, 2, nbytes, crc);
        fragment(message, 0, RemoteProtocol.END_LENGTH, FrameDescriptor.UNFRAGMENTED);
    }

    // Lays the fragment out as the term does (Aeron's data header, then the bytes) and hands it over.
    private void fragment(UnsafeBuffer source, int offset, int length, byte flags) {
        frame.setMemory(0, DataHeaderFlyweight.HEADER_LENGTH, (byte) 0);
        frame.putInt(0, DataHeaderFlyweight.HEADER_LENGTH + length);
        frame.putByte(HeaderFlyweight.FLAGS_FIELD_OFFSET, flags);
        frame.putInt(DataHeaderFlyweight.SESSION_ID_FIELD_OFFSET, SESSION);
        frame.putBytes(DataHeaderFlyweight.HEADER_LENGTH, source, offset, length);
        header.buffer(frame).offset(0);
        landing.onFragment(frame, DataHeaderFlyweight.HEADER_LENGTH, length, header);
    }
}
