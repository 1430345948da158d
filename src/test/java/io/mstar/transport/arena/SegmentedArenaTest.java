package io.mstar.transport.arena;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.SmallTmpfs;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SegmentedArenaTest {
    private static final long SEGMENT = 1 << 20;
    private static final Namespace NS = Namespace.of(null, "segmented-arena-test");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private SegmentedArena arena(int maxSegments) {
        return new SegmentedArena(shm.path(), NS, "producer", SEGMENT, maxSegments);
    }

    @Test
    void growsOneSegmentAtATimeUpToTheCapThenReportsFull() {
        try (SegmentedArena arena = arena(3)) {
            assertEquals(0, arena.stats().segments(), "no segment before the first reserve");
            arena.prepare();
            arena.prepare();
            assertEquals(1, arena.stats().segments(), "prepare() makes the first segment, once");
            List<Long> slots = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                long slot = arena.reserve(SEGMENT / 2);
                assertNotEquals(SegmentedArena.FULL, slot);
                slots.add(slot);
                assertEquals(i / 2 + 1, arena.stats().segments());
            }
            assertEquals(SegmentedArena.FULL, arena.reserve(1));
            ArenaStats full = arena.stats();
            assertEquals(3 * SEGMENT, full.capacityBytes());
            assertEquals(0, full.freeBytes());
            assertEquals(1, full.failedReserves());
            List<String> files = ShmTestDir.list(shm.path());
            assertEquals(3, files.size());
            for (String f : files) {
                assertTrue(ShmNames.SEGMENT.matcher(f).matches(), f);
                assertTrue(f.startsWith("mstar_" + NS.id() + "_arena_producer_"), f);
            }
            // Freed space is reused first fit: the lowest segment that has room.
            assertEquals(FreeOutcome.FREED, arena.free(slots.get(3)));
            long again = arena.reserve(1000);
            assertEquals(arena.segmentName(slots.get(2)), arena.segmentName(again));
            assertEquals(SEGMENT / 2, SegmentedArena.offset(again));
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "close unlinks every segment");
    }

    @Test
    void theSlotFreedLastComesBackFirstAndKeptSlotsNeverMakeAReserveFail() {
        long slotBytes = 64 << 10;
        try (SegmentedArena arena = arena(1)) {
            List<Long> slots = new ArrayList<>();
            for (int i = 0; i < SEGMENT / slotBytes; i++) {
                slots.add(arena.reserve(slotBytes));
            }
            assertEquals(FreeOutcome.FREED, arena.free(slots.get(1)));
            assertEquals(FreeOutcome.FREED, arena.free(slots.get(5)));
            assertEquals(slots.get(5), arena.reserve(slotBytes), "the slot freed last, though another lies lower");
            assertEquals(FreeOutcome.DOUBLE_FREE, arena.free(slots.get(1)), "a kept slot is already free");
            assertThrows(IllegalArgumentException.class, () -> arena.slotMemory(slots.get(1), 1),
                "a kept slot is no live slot");
            // Four freed neighbours are kept (a quarter of the segment); only together do they hold this reserve.
            for (int i = 2; i <= 4; i++) {
                assertEquals(FreeOutcome.FREED, arena.free(slots.get(i)));
            }
            long joined = arena.reserve(4 * slotBytes);
            assertNotEquals(SegmentedArena.FULL, joined, "the kept slots go back to the tree before the arena says full");
            assertEquals(slotBytes, SegmentedArena.offset(joined), "coalesced, first fit");
            ArenaStats stats = arena.stats();
            assertEquals(1, stats.segments());
            assertEquals(0, stats.failedReserves());
            assertEquals(FreeOutcome.FREED, arena.free(slots.get(7)));
            assertEquals(slotBytes, arena.stats().freeBytes(), "statistics count a kept slot as free");
        }
    }

    @Test
    void slotMemoryIsTheSegmentItNamesAndAPeerReadsIt() {
        try (SegmentedArena arena = arena(2)) {
            long slot = arena.reserve(4096);
            MemorySegment memory = arena.slotMemory(slot, 4096);
            memory.set(JAVA_LONG, 8, 42L);
            try (MappedSegment peer = MappedSegment.openPeer(shm.path(), arena.segmentName(slot), 4096)) {
                assertEquals(42L, peer.memory().get(JAVA_LONG, SegmentedArena.offset(slot) + 8));
            }
            assertThrows(IllegalArgumentException.class, () -> arena.slotMemory(slot, 4097), "larger than the slot");
            arena.free(slot);
            assertThrows(IllegalArgumentException.class, () -> arena.slotMemory(slot, 1), "freed slot");
        }
    }

    @Test
    void oversizedRequestGetsADedicatedSegmentKeptForReuseUntilTheCapNeedsItsRoom() {
        try (SegmentedArena arena = arena(5)) { // a ceiling of 5 segments' bytes
            long small = arena.reserve(100);
            long big = arena.reserve(3 * SEGMENT + 5);
            assertNotEquals(SegmentedArena.FULL, big);
            assertEquals(0, SegmentedArena.offset(big));
            assertEquals(2, ShmTestDir.list(shm.path()).size());
            ArenaStats stats = arena.stats();
            assertEquals(SEGMENT + 3 * SEGMENT + 4096, stats.capacityBytes(), "page-aligned dedicated size");
            arena.slotMemory(big, 3 * SEGMENT + 5).set(JAVA_LONG, 3 * SEGMENT - 8, 1L);
            assertEquals(SegmentedArena.FULL, arena.reserve(2 * SEGMENT + 1),
                "past the byte ceiling, a second large tensor finds no room while the first holds the dedicated segment");
            String bigName = arena.segmentName(big);
            assertEquals(FreeOutcome.FREED, arena.free(big));
            assertTrue(Files.exists(shm.path().resolve(bigName)), "kept, idle, after its slot is freed");

            long again = arena.reserve(2 * SEGMENT);
            assertEquals(bigName, arena.segmentName(again), "the next large tensor that fits reuses it");
            assertEquals(FreeOutcome.FREED, arena.free(again));

            // At the ceiling, a regular segment needs the room: the idle dedicated segment gives it back.
            long rest = arena.reserve(SEGMENT - 256);
            long grown = arena.reserve(1000);
            assertNotEquals(SegmentedArena.FULL, grown);
            assertTrue(Files.notExists(shm.path().resolve(bigName)), "unlinked when the cap needed its room");
            assertEquals(2, arena.stats().segments());
            // A stale handle to the released segment never frees a slot of the one that replaced it.
            assertEquals(FreeOutcome.UNKNOWN_OFFSET, arena.free(big));
            for (long slot : new long[] {small, rest, grown}) {
                assertEquals(FreeOutcome.FREED, arena.free(slot));
            }
            assertEquals(0, arena.stats().liveSlots());
        }
    }

    @Test
    void fragmentationAndAnOutsizedPinBudgetWarnOnceHoweverOftenTheyHold() {
        try (SegmentedArena arena = arena(1)) {
            long[] quarters = new long[4];
            for (int i = 0; i < 4; i++) {
                quarters[i] = arena.reserve(SEGMENT / 4);
            }
            arena.free(quarters[0]);
            arena.free(quarters[2]);
            String log = capturedErr(() -> {
                for (int i = 0; i < 5; i++) {
                    assertEquals(SegmentedArena.FULL, arena.reserve(SEGMENT / 4 + 1), "half is free, in two quarters");
                }
            });
            assertEquals(5, arena.warnings().counts().get(CapacityWarnings.Kind.FRAGMENTATION));
            assertEquals(1, log.split("fragmentation: the arena's free bytes", -1).length - 1, log);
            assertEquals(SegmentedArena.FULL, arena.reserve(SEGMENT), "no fragmentation: the free bytes are too few");
            assertEquals(5, arena.warnings().counts().get(CapacityWarnings.Kind.FRAGMENTATION));

            String pinLog = capturedErr(() -> {
                arena.warnings().checkPinBudget(true, Long.MAX_VALUE / 2);
                arena.warnings().checkPinBudget(true, Long.MAX_VALUE / 2);
                arena.warnings().checkPinBudget(false, Long.MAX_VALUE / 2);
            });
            assertEquals(2, arena.warnings().counts().get(CapacityWarnings.Kind.PIN_BUDGET_ABOVE_QUARTER_OF_RAM));
            assertEquals(1, pinLog.split("pin budget is more than a quarter", -1).length - 1, pinLog);
            arena.warnings().checkPinBudget(true, CapacityWarnings.physicalMemoryBytes() / 8);
            assertEquals(2, arena.warnings().counts().get(CapacityWarnings.Kind.PIN_BUDGET_ABOVE_QUARTER_OF_RAM));
        }
    }

    private static String capturedErr(Runnable action) {
        PrintStream original = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true));
        try {
            action.run();
        } finally {
            System.setErr(original);
        }
        return captured.toString();
    }

    @Test
    void refusalsAreCountedAndChangeNothing() {
        try (SegmentedArena arena = arena(1)) {
            long slot = arena.reserve(512);
            assertThrows(IllegalArgumentException.class, () -> arena.reserve(0));
            assertEquals(FreeOutcome.FREED, arena.free(slot));
            assertEquals(FreeOutcome.DOUBLE_FREE, arena.free(slot));
            assertEquals(FreeOutcome.UNKNOWN_OFFSET, arena.free(-1));
            assertEquals(FreeOutcome.UNKNOWN_OFFSET, arena.free(slot | (5L << 40)), "no segment at that position");
            ArenaStats stats = arena.stats();
            assertEquals(3, stats.refusedFrees());
            assertEquals(1, stats.failedReserves());
            assertEquals(1, stats.reserves());
            assertEquals(1, stats.frees());
            assertEquals(SEGMENT, stats.largestFreeBlockBytes());
            assertEquals(0.0, stats.fragmentation());
        }
    }

    @Test
    void fragmentationCountsHolesWithinSegmentsNotTheSplitBetweenThem() {
        try (SegmentedArena arena = arena(2)) {
            long first = arena.reserve(SEGMENT);
            long second = arena.reserve(SEGMENT); // a second segment
            assertEquals(FreeOutcome.FREED, arena.free(first));
            assertEquals(FreeOutcome.FREED, arena.free(second));
            assertEquals(0.0, arena.stats().fragmentation(), "two empty segments: nothing is fragmented");
            long a = arena.reserve(SEGMENT / 4);
            long b = arena.reserve(SEGMENT / 4);
            assertEquals(FreeOutcome.FREED, arena.free(a)); // a quarter free before b, half after it
            ArenaStats stats = arena.stats();
            assertEquals(1.0 - (SEGMENT / 2 + SEGMENT) / (double) (SEGMENT / 4 + SEGMENT / 2 + SEGMENT),
                stats.fragmentation(), 1e-9);
            assertEquals(FreeOutcome.FREED, arena.free(b));
        }
    }

    @Test
    void closedArenaRefusesUse() {
        SegmentedArena arena = arena(1);
        arena.reserve(10);
        arena.close();
        arena.close();
        assertThrows(IllegalStateException.class, () -> arena.reserve(10));
        assertEquals(List.of(), ShmTestDir.list(shm.path()));
    }

    @Test
    void ceilingLargerThanTheFileSystemFailsNamingSizesAndFixes() {
        long total = Posix.statvfs(shm.path().toString()).totalBytes();
        int tooMany = (int) Math.min(4096, total / (256L << 20) + 1);
        ConfigurationException e = assertThrows(ConfigurationException.class,
            () -> new SegmentedArena(shm.path(), NS, "p", 256L << 20, tooMany));
        String m = e.getMessage();
        assertTrue(m.contains("fileSystemBytes=" + total) && m.contains("ceilingBytes=" + tooMany * (256L << 20)), m);
        assertTrue(m.contains("--shm-size") && m.contains("MSTAR_SHM_ARENA_MAX_SEGMENTS"), m);

        ConfigurationException missing = assertThrows(ConfigurationException.class,
            () -> new SegmentedArena(shm.path().resolve("nope"), NS, "p", SEGMENT, 1));
        assertTrue(missing.getMessage().contains("MSTAR_SHM_DIR"), missing.getMessage());
    }

    @Test
    void fullTmpfsStopsGrowthWithTheFullOutcome() throws Exception {
        try (SmallTmpfs tmpfs = SmallTmpfs.mount(16 << 20)) {
            try (SegmentedArena arena = new SegmentedArena(tmpfs.path(), NS, "p", 4 << 20, 4)) {
                Files.write(tmpfs.path().resolve("filler"), new byte[9 << 20]);
                assertNotEquals(SegmentedArena.FULL, arena.reserve(3 << 20));
                assertEquals(SegmentedArena.FULL, arena.reserve(3 << 20), "3 MiB left cannot back a second 4 MiB segment");
                Files.delete(tmpfs.path().resolve("filler"));
                assertNotEquals(SegmentedArena.FULL, arena.reserve(3 << 20), "grows again once space is back");
                assertEquals(2, arena.stats().segments());
            }
            assertEquals(List.of(), ShmTestDir.list(tmpfs.path()));
        }
    }

    @Test
    void ceilingAboveFreeSpaceAndATmpfsPast80PercentEachWarnOnce() throws Exception {
        try (SmallTmpfs tmpfs = SmallTmpfs.mount(16 << 20)) {
            Files.write(tmpfs.path().resolve("filler"), new byte[9 << 20]);
            String log = capturedErr(() -> {
                try (SegmentedArena arena = new SegmentedArena(tmpfs.path(), NS, "p", 2 << 20, 8)) {
                    assertEquals(1, arena.warnings().counts().get(CapacityWarnings.Kind.CEILING_ABOVE_FREE_SPACE));
                    for (int i = 0; i < 3; i++) {
                        assertNotEquals(SegmentedArena.FULL, arena.reserve(2 << 20)); // growth to 13, then 15 MiB of 16
                    }
                    assertEquals(2, arena.warnings().counts().get(CapacityWarnings.Kind.SHM_ABOVE_80_PERCENT));
                }
            });
            assertTrue(log.contains("ceiling exceeds the free shared memory") && log.contains("ceilingBytes=" + (16 << 20)),
                log);
            assertEquals(1, log.split("more than 80% used", -1).length - 1, log);
            Files.delete(tmpfs.path().resolve("filler"));
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void senderAndAckThreadsShareTheArenaConsistently() throws Exception {
        try (SegmentedArena arena = arena(4)) {
            BlockingQueue<long[]> inFlight = new ArrayBlockingQueue<>(256);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            int tensors = 50_000;
            Thread acker = new Thread(() -> {
                try {
                    for (int i = 0; i < tensors; i++) {
                        long[] slot = inFlight.take();
                        MemorySegment memory = arena.slotMemory(slot[0], 16);
                        if (memory.get(JAVA_LONG, 0) != slot[1] || memory.get(JAVA_LONG, 8) != ~slot[1]) {
                            throw new AssertionError("slot overwritten while live: tensor " + slot[1]);
                        }
                        if (arena.free(slot[0]) != FreeOutcome.FREED) {
                            throw new AssertionError("free refused for tensor " + slot[1]);
                        }
                    }
                } catch (Throwable t) {
                    failure.set(t);
                }
            }, "acker");
            acker.start();
            SplittableRandom random = new SplittableRandom(7);
            for (long i = 0; i < tensors && failure.get() == null; i++) {
                long size = 16 + random.nextInt(128 << 10);
                long slot;
                while ((slot = arena.reserve(size)) == SegmentedArena.FULL) {
                    Thread.onSpinWait();
                }
                MemorySegment memory = arena.slotMemory(slot, 16);
                memory.set(JAVA_LONG, 0, i);
                memory.set(JAVA_LONG, 8, ~i);
                inFlight.put(new long[] {slot, i});
                if (i % 1000 == 0) {
                    ArenaStats s = arena.stats();
                    assertEquals(s.capacityBytes(), s.usedBytes() + s.freeBytes());
                    assertEquals(s.reserves() - s.frees(), s.liveSlots());
                }
            }
            acker.join();
            assertNull(failure.get(), () -> String.valueOf(failure.get()));
            ArenaStats end = arena.stats();
            assertEquals(0, end.liveSlots());
            assertEquals(0, end.usedBytes());
            assertEquals(tensors, end.reserves());
            assertEquals(tensors, end.frees());
            assertEquals(0, end.refusedFrees());
        }
    }
}
