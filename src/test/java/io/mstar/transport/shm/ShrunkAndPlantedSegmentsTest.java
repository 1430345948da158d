package io.mstar.transport.shm;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a process of this user can do to a segment by name: put a FIFO where a descriptor says a segment is
 * (the consumer's open must not wait for a writer), or shrink a live segment ({@code truncate -s 0}): the
 * reader gets a {@link SegmentAccessException}, never the JVM's {@code InternalError} for the SIGBUS, and the
 * producer retires the segment and goes on in another.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ShrunkAndPlantedSegmentsTest {
    private static final int BYTES = 4096;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private Deployment deployment(String entity) {
        return Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "1", TransportConfig.MAX_SEGMENTS, "4")::get),
            "shrunk", entity);
    }

    private static Tensor pattern(Arena arena, int seed) {
        MemorySegment bytes = arena.allocate(BYTES);
        for (int i = 0; i < BYTES; i++) {
            bytes.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + seed));
        }
        return Tensor.of(DType.U8, bytes, BYTES);
    }

    private static boolean holds(MemorySegment data, int seed) {
        for (int i = 0; i < BYTES; i++) {
            if (data.get(ValueLayout.JAVA_BYTE, i) != (byte) (i * 31 + seed)) {
                return false;
            }
        }
        return true;
    }

    @Test
    void aFifoWhereADescriptorSaysASegmentIsIsRefusedAtOnceAndTheNextTensorIsRead() throws Exception {
        try (TensorTransport producer = TensorTransports.create(deployment("producer"), false);
             TensorTransport consumer = TensorTransports.create(deployment("consumer"), false);
             Arena arena = Arena.ofConfined()) {
            String fifoName = "mstar_" + deployment("x").namespace() + "_arena_producer_0badf00d_0";
            Path fifo = shm.path().resolve(fifoName);
            assertEquals(0, new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor());
            TensorDescriptor forged = new TensorDescriptor(UUID.randomUUID(), "forged", "producer", DType.U8,
                new long[] {BYTES}, BYTES, Placement.ARENA, fifoName, 0);
            SegmentAccessException e = assertTimeoutPreemptively(Duration.ofSeconds(5),
                () -> assertThrows(SegmentAccessException.class, () -> consumer.receive(forged)),
                "the open of a FIFO waited for a writer");
            assertTrue(e.getMessage().contains("not a regular file"), e.getMessage());

            TensorDescriptor honest = producer.send("honest", List.of(pattern(arena, 3))).getFirst();
            try (ReceivedTensor t = consumer.receive(honest)) {
                assertTrue(holds(t.data(), 3));
            }
            java.nio.file.Files.delete(fifo);
        }
    }

    @Test
    void aSegmentShrunkUnderItsReaderIsRefusedAsOursAndTheProducerGoesOnInAnother() throws Exception {
        try (TensorTransport producer = TensorTransports.create(deployment("producer"), false);
             TensorTransport consumer = TensorTransports.create(deployment("consumer"), false);
             Arena arena = Arena.ofConfined()) {
            TensorDescriptor held = producer.send("held", List.of(pattern(arena, 1))).getFirst();
            TensorDescriptor queued = producer.send("queued", List.of(pattern(arena, 2))).getFirst();
            assertEquals(held.fileName(), queued.fileName());
            MappedView view = (MappedView) consumer.receive(held);
            assertTrue(holds(view.data(), 1));

            truncate(shm.path().resolve(held.fileName()));

            SegmentAccessException whileHeld = assertThrows(SegmentAccessException.class, view::checkIntact);
            assertTrue(whileHeld.getMessage().contains("shrunk"), whileHeld.getMessage());
            view.close();
            SegmentAccessException next = assertThrows(SegmentAccessException.class, () -> consumer.receive(queued));
            assertTrue(next.getMessage().contains("shrunk"), next.getMessage());

            TensorDescriptor after = producer.send("after", List.of(pattern(arena, 4))).getFirst();
            assertTrue(!after.fileName().equals(held.fileName()), "the shrunk segment took a new tensor");
            try (ReceivedTensor t = consumer.receive(after)) {
                assertTrue(holds(t.data(), 4));
            }
            producer.ack(List.of(held.uuid(), queued.uuid(), after.uuid()));
        }
    }

    private static void truncate(Path file) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
            channel.truncate(0);
        }
    }
}
