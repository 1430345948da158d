package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.exceptions.CapacityException;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.shm.SlotStamp;
import io.mstar.transport.spill.FileTransport;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import static io.mstar.transport.TensorTransportContract.crc;
import static io.mstar.transport.TensorTransportContract.randomTensor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ArenaTransportTest {
    private static final Namespace NS = Namespace.of(null, "arena-transport-test");
    private static final long SEGMENT = 1 << 20;
    /** The largest tensor that fills a segment: a slot holds the tensor and its stamp. */
    private static final long WHOLE = SEGMENT - SlotStamp.STAMP_BYTES;
    private static final int QUARTER = (int) (SEGMENT / 4 - SlotStamp.STAMP_BYTES);

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private TransportConfig config(String... pairs) {
        Map<String, String> env = new HashMap<>();
        env.put(TransportConfig.SHM_DIR, shm.path().toString());
        for (int i = 0; i < pairs.length; i += 2) {
            env.put(pairs[i], pairs[i + 1]);
        }
        return TransportConfig.from(env::get);
    }

    private ArenaTransport transport(TransportConfig config, String entity, int maxSegments) {
        return new ArenaTransport(config, new SegmentedArena(shm.path(), NS, entity, SEGMENT, maxSegments), false);
    }

    @Test
    void atTheCapWithoutGraceItSpillsAndEveryTensorArrives() {
        SplittableRandom r = new SplittableRandom(1);
        try (ArenaTransport producer = transport(config(), "p", 2);
             ArenaTransport consumer = transport(config(), "c", 1)) {
            List<Tensor> tensors = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                tensors.add(randomTensor(r, DType.U8, QUARTER));
            }
            List<TensorDescriptor> sent = producer.send("r", tensors);
            long spilled = sent.stream().filter(d -> d.placement() == Placement.SPILL).count();
            assertEquals(4, spilled, "two 1 MiB segments hold 8 tensors of 256 KiB");
            TransportStats stats = producer.statsSummary();
            assertEquals(4, stats.spills());
            assertEquals(4 * QUARTER, stats.spillBytes());
            assertEquals(0, stats.backpressureWaits(), "SPILL_AFTER_S=0: no wait");
            for (int i = 0; i < sent.size(); i++) {
                try (ReceivedTensor in = consumer.receive(sent.get(i))) {
                    assertEquals(crc(tensors.get(i).data()), crc(in.data()));
                }
            }
            producer.ack(sent.stream().map(TensorDescriptor::uuid).toList());
            assertEquals(0, producer.statsSummary().inFlight());
            assertEquals(0, producer.statsSummary().arena().liveSlots());
        }
    }

    @Test
    void aClaimAtTheCapGetsAFileOfItsOwnAndAnOpenClaimIsNeverReclaimedByTheTtl() throws Exception {
        try (ArenaTransport producer = transport(config(TransportConfig.SLOT_TTL_S, "0.05"), "p", 1);
             ArenaTransport consumer = transport(config(), "c", 1)) {
            TensorClaim slot = producer.claim("r", DType.U8, WHOLE);
            TensorClaim file = producer.claim("r", DType.U8, 1000);
            Thread.sleep(300); // several TTL periods: what is claimed is not in flight yet
            slot.memory().fill((byte) 3);
            file.memory().fill((byte) 4);
            TensorDescriptor inSlot = slot.publish();
            TensorDescriptor inFile = file.publish();
            assertEquals(Placement.ARENA, inSlot.placement());
            assertEquals(Placement.SPILL, inFile.placement(), "the one segment is full: the claim spilled");
            assertEquals(1, producer.statsSummary().spills());
            try (ReceivedTensor a = consumer.receive(inSlot); ReceivedTensor b = consumer.receive(inFile)) {
                assertEquals(3, a.data().get(ValueLayout.JAVA_BYTE, WHOLE - 1));
                assertEquals(4, b.data().get(ValueLayout.JAVA_BYTE, 999));
            }
            assertEquals(0, producer.statsSummary().ttlReclaims());
            producer.ack(List.of(inSlot.uuid(), inFile.uuid()));
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void aThreadsNextClaimReusesItsPublishedClaimAndTheShapeIsCopied() {
        try (ArenaTransport producer = transport(config(), "p", 1);
             ArenaTransport consumer = transport(config(), "c", 1)) {
            long[] shape = {4, 8};
            TensorClaim first = producer.claim("a", DType.U8, shape);
            shape[1] = 16; // the caller's array is its own again: the claim copied it
            first.memory().fill((byte) 1);
            TensorDescriptor a = first.publish();
            assertThrows(IllegalStateException.class, first::memory, "published: no more writing");
            TensorClaim second = producer.claim("b", DType.U8, shape);
            assertTrue(first == second, "a thread's published claim is rearmed, not allocated again");
            second.memory().fill((byte) 2);
            TensorClaim third = producer.claim("c", DType.U8, 3); // the second is still open: a claim of its own
            assertTrue(third != second);
            third.memory().fill((byte) 3);
            TensorDescriptor c = third.publish();
            TensorDescriptor b = second.publish();
            assertEquals(List.of(4L, 8L), List.of(a.shape()[0], a.shape()[1]));
            assertEquals(List.of(4L, 16L), List.of(b.shape()[0], b.shape()[1]));
            assertEquals("b", b.requestId());
            for (TensorDescriptor d : List.of(a, b, c)) {
                try (ReceivedTensor in = consumer.receive(d)) {
                    byte expected = (byte) (d == a ? 1 : d == b ? 2 : 3);
                    for (long i = 0; i < d.nbytes(); i++) {
                        assertEquals(expected, in.data().get(ValueLayout.JAVA_BYTE, i), d.requestId() + " byte " + i);
                    }
                }
            }
            producer.ack(List.of(a.uuid(), b.uuid(), c.uuid()));
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void aClaimPublishedOnAnotherThreadIsNeverReused() throws Exception {
        try (ArenaTransport producer = transport(config(), "p", 1);
             ArenaTransport consumer = transport(config(), "c", 1)) {
            TensorClaim mine = producer.claim("a", DType.U8, 64);
            mine.memory().fill((byte) 1);
            TensorDescriptor[] a = new TensorDescriptor[1];
            Thread other = Thread.ofPlatform().start(() -> a[0] = mine.publish());
            other.join();
            TensorClaim next = producer.claim("b", DType.U8, 32);
            assertTrue(next != mine, "the thread that published it might still read it: never rearmed");
            next.memory().fill((byte) 2);
            TensorDescriptor b = next.publish();
            assertEquals("a", a[0].requestId());
            assertEquals(64, a[0].nbytes());
            try (ReceivedTensor in = consumer.receive(a[0])) {
                assertEquals(1, in.data().get(ValueLayout.JAVA_BYTE, 63));
            }
            producer.ack(List.of(a[0].uuid(), b.uuid()));
        }
    }

    @Test
    void withGraceItWaitsForAnAckAndTakesTheFreedSlot() throws Exception {
        SplittableRandom r = new SplittableRandom(2);
        try (ArenaTransport producer = transport(config(TransportConfig.SPILL_AFTER_S, "10"), "p", 1)) {
            TensorDescriptor first = producer.send("r", List.of(randomTensor(r, DType.U8, WHOLE))).getFirst();
            Thread acker = new Thread(() -> {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                }
                producer.ack(List.of(first.uuid()));
            });
            acker.start();
            TensorDescriptor second = producer.send("r", List.of(randomTensor(r, DType.U8, WHOLE))).getFirst();
            acker.join();
            assertEquals(Placement.ARENA, second.placement(), "the ACK freed the slot before the grace ran out");
            TransportStats stats = producer.statsSummary();
            assertEquals(1, stats.backpressureWaits());
            assertTrue(stats.backpressureWaitNs() >= 100_000_000L, "waited for the ACK: " + stats.backpressureWaitNs());
            assertEquals(0, stats.spills());
            producer.ack(List.of(second.uuid()));
        }
    }

    @Test
    void strictModeFailsClearlyAndRollsTheBatchBack() {
        SplittableRandom r = new SplittableRandom(3);
        TransportConfig strict = config(TransportConfig.SPILL, "0", TransportConfig.FULL_TIMEOUT_S, "0.3");
        try (ArenaTransport producer = transport(strict, "p", 1)) {
            List<Tensor> batch = List.of(randomTensor(r, DType.U8, SEGMENT / 2), randomTensor(r, DType.U8, SEGMENT / 2),
                randomTensor(r, DType.U8, SEGMENT / 2));
            long start = System.nanoTime();
            CapacityException e = assertThrows(CapacityException.class, () -> producer.send("r", batch));
            assertTrue(System.nanoTime() - start >= 250_000_000L, "waited FULL_TIMEOUT_S first");
            assertTrue(e.getMessage().contains("MSTAR_SHM_ARENA_SPILL=0") && e.getMessage().contains("strict"),
                e.getMessage());
            TransportStats stats = producer.statsSummary();
            assertEquals(0, stats.inFlight(), "nothing of the failed batch stays reserved");
            assertEquals(0, stats.arena().liveSlots());
            assertEquals(1, stats.backpressureWaits());
            // The arena keeps serving.
            TensorDescriptor d = producer.send("r", List.of(batch.getFirst())).getFirst();
            producer.ack(List.of(d.uuid()));
        }
    }

    @Test
    void tensorLargerThanASegmentGetsItsOwnSegmentAndAConsumerDropsItsMappingOnceItGoes() throws Exception {
        SplittableRandom r = new SplittableRandom(4);
        try (ArenaTransport producer = transport(config(), "p", 5); // a ceiling of 5 MiB: room for the 3 MiB tensor
             ArenaTransport consumer = transport(config(), "c", 1)) {
            Tensor big = randomTensor(r, DType.F32, 3, SEGMENT / 4 + 5);
            TensorDescriptor d = producer.send("r", List.of(big)).getFirst();
            assertEquals(Placement.ARENA, d.placement());
            try (ReceivedTensor in = consumer.receive(d)) {
                assertEquals(crc(big.data()), crc(in.data()));
            }
            assertEquals(1, consumer.statsSummary().mappedPeerSegments());
            producer.ack(List.of(d.uuid()));
            assertTrue(Files.exists(shm.path().resolve(d.fileName())), "the idle dedicated segment is kept for reuse");
            TensorDescriptor again = producer.send("r", List.of(big)).getFirst();
            assertEquals(d.fileName(), again.fileName(), "and reused by the next large tensor");
            producer.ack(List.of(again.uuid()));

            // The first segment filled, growth at the cap takes the idle dedicated segment's room.
            TensorDescriptor full = producer.send("r", List.of(randomTensor(r, DType.U8, (int) WHOLE))).getFirst();
            TensorDescriptor grown = producer.send("r", List.of(randomTensor(r, DType.U8, 10))).getFirst();
            assertEquals(Placement.ARENA, grown.placement());
            assertTrue(Files.notExists(shm.path().resolve(d.fileName())));
            Thread.sleep(1100);
            consumer.receive(grown).close(); // a receive after the sweep interval drops the gone mapping
            assertEquals(1, consumer.statsSummary().mappedPeerSegments());
            producer.ack(List.of(full.uuid(), grown.uuid()));
        }
    }

    @Test
    void dedicatedSegmentsCountAgainstTheByteCeilingAndEveryTensorArrivesIntact() {
        long seed = System.nanoTime();
        SplittableRandom r = new SplittableRandom(seed);
        int maxSegments = 4;
        long ceiling = maxSegments * SEGMENT;
        long peak = 0;
        int spilled = 0;
        try (ArenaTransport producer = transport(config(), "p", maxSegments);
             ArenaTransport consumer = transport(config(), "c", 1)) {
            List<TensorDescriptor> inFlight = new ArrayList<>();
            Map<TensorDescriptor, Long> crcs = new HashMap<>();
            for (int i = 0; i < 60; i++) {
                Tensor t = randomTensor(r, DType.U8, (int) (SEGMENT + r.nextLong(5 * SEGMENT / 2)));
                TensorDescriptor d = producer.send("r" + i, List.of(t)).getFirst();
                crcs.put(d, crc(t.data()));
                spilled += d.placement() == Placement.SPILL ? 1 : 0;
                inFlight.add(d);
                peak = Math.max(peak, producer.statsSummary().arena().capacityBytes());
                while (inFlight.size() > 1 + r.nextInt(3)) {
                    TensorDescriptor done = inFlight.remove(r.nextInt(inFlight.size()));
                    try (ReceivedTensor in = consumer.receive(done)) {
                        assertEquals(crcs.get(done), crc(in.data()), "seed=" + seed);
                    }
                    producer.ack(List.of(done.uuid()));
                }
            }
            for (TensorDescriptor done : inFlight) {
                try (ReceivedTensor in = consumer.receive(done)) {
                    assertEquals(crcs.get(done), crc(in.data()), "seed=" + seed);
                }
                producer.ack(List.of(done.uuid()));
            }
        }
        assertTrue(peak <= ceiling, "segment bytes peaked at " + peak + " over the ceiling " + ceiling + ", seed=" + seed);
        assertTrue(spilled > 0, "past the ceiling a tensor spills: seed=" + seed);
        System.out.println("byte ceiling: peak " + peak + " of " + ceiling + " bytes, 60 tensors of 1 to 3.5 MiB, "
            + spilled + " spilled, seed=" + seed);
    }

    @Test
    void slotsWithoutAckAreReclaimedAfterTheTtl() throws Exception {
        try (ArenaTransport producer = transport(config(TransportConfig.SLOT_TTL_S, "0.2"), "p", 1)) {
            TensorDescriptor d = producer.send("r", List.of(randomTensor(new SplittableRandom(5), DType.U8, 1000))).getFirst();
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (producer.statsSummary().ttlReclaims() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            TransportStats stats = producer.statsSummary();
            assertEquals(1, stats.ttlReclaims());
            assertEquals(0, stats.inFlight());
            assertEquals(0, stats.arena().liveSlots());
            producer.ack(List.of(d.uuid()));
            assertEquals(1, producer.statsSummary().unknownAcks(), "a late ACK frees nothing");
        }
    }

    @Test
    void spilledTensorsWithoutAckAreRemovedAfterTheTtlToo() throws Exception {
        try (ArenaTransport producer = transport(config(TransportConfig.SLOT_TTL_S, "0.2"), "p", 1)) {
            SplittableRandom r = new SplittableRandom(6);
            List<TensorDescriptor> sent = producer.send("r", List.of(randomTensor(r, DType.U8, (int) WHOLE),
                randomTensor(r, DType.U8, 1000)));
            TensorDescriptor spilled = sent.get(1);
            assertEquals(Placement.SPILL, spilled.placement(), "the arena's one segment is full");
            assertTrue(Files.exists(shm.path().resolve(spilled.fileName())));
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (producer.statsSummary().ttlReclaims() < 2 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            TransportStats stats = producer.statsSummary();
            assertEquals(2, stats.ttlReclaims(), "the slot and the spill file");
            assertEquals(0, stats.inFlight());
            assertEquals(List.of(), ShmTestDir.list(shm.path()).stream().filter(f -> f.contains("_spill_")).toList(),
                "the expired spill file is gone");
            producer.ack(List.of(spilled.uuid()));
            assertEquals(1, producer.statsSummary().unknownAcks(), "a late ACK frees nothing");
        }
    }

    @Test
    void factoryPicksTheTransportTheModeNames() {
        try (TensorTransport file = TensorTransports.create(Deployment.of(config(TransportConfig.ARENA, "0"), "ep", "a"), false)) {
            assertInstanceOf(FileTransport.class, file);
        }
        try (TensorTransport arena = TensorTransports.create(Deployment.of(config(TransportConfig.ARENA, "1"), "ep", "a"), false)) {
            assertInstanceOf(ArenaTransport.class, arena);
        }
        // A ceiling far above the tmpfs: ARENA fails with the reason, AUTO falls back to files.
        String[] tooBig = {TransportConfig.SEGMENT_MB, "65536", TransportConfig.MAX_SEGMENTS, "4096"};
        String[] arenaMode = {TransportConfig.ARENA, "1", tooBig[0], tooBig[1], tooBig[2], tooBig[3]};
        assertThrows(ConfigurationException.class,
            () -> TensorTransports.create(Deployment.of(config(arenaMode), "ep", "a"), false));
        String[] autoMode = {TransportConfig.ARENA, "AUTO", tooBig[0], tooBig[1], tooBig[2], tooBig[3]};
        try (TensorTransport auto = TensorTransports.create(Deployment.of(config(autoMode), "ep", "a"), false)) {
            assertInstanceOf(FileTransport.class, auto);
        }
    }
}
