package io.mstar.transport.arena;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Randomized model test: a seeded sequence of reserves and frees (with double frees, unknown offsets
 * and bad sizes mixed in) runs against {@link FirstFitAllocator} and the sorted-list reference, which
 * must return identical offsets; the invariants are checked after every step. A failure prints the
 * seed; rerun one with {@code -Dmodel.seed=<seed>}.
 */
@Tag("long")
class FirstFitAllocatorModelTest {
    private static final int STEPS = 100_000;
    private static final long CAPACITY = 64L << 20;

    /** Mixed sizes up to 4 MiB: a few hundred free blocks, every invariant checked after every step. */
    @Test
    void matchesSortedListReferenceOnSeededTraces() {
        for (long seed : seeds(1L, 2L, 3L, 0xC0FFEEL)) {
            run(seed, false, 1);
        }
    }

    /**
     * Small sizes: thousands of free blocks, so the tree grows several levels, splits and collapses.
     * Offsets are compared at every step, the whole structure every 97 steps and at the end.
     */
    @Test
    void matchesReferenceInDeepTrees() {
        for (long seed : seeds(11L, 12L)) {
            FirstFitAllocator ours = run(seed, true, 97);
            assertTrue(ours.treeHeight() == 0 && ours.freeBlocks() == 1, "drained back to one block in one leaf");
        }
    }

    private static List<Long> seeds(Long... fixedSeeds) {
        String fixed = System.getProperty("model.seed");
        if (fixed != null) {
            return List.of(Long.parseLong(fixed));
        }
        List<Long> seeds = new ArrayList<>(List.of(fixedSeeds));
        seeds.add(System.nanoTime());
        return seeds;
    }

    private static FirstFitAllocator run(long seed, boolean small, int checkEvery) {
        try {
            return runSeed(seed, small, checkEvery);
        } catch (AssertionError | RuntimeException e) {
            return fail("model test failed with seed=" + seed + " (rerun: -Dmodel.seed=" + seed + "): " + e, e);
        }
    }

    private static FirstFitAllocator runSeed(long seed, boolean small, int checkEvery) {
        SplittableRandom random = new SplittableRandom(seed);
        FirstFitAllocator ours = new FirstFitAllocator(CAPACITY);
        SortedListFirstFit model = new SortedListFirstFit(CAPACITY);
        List<Long> liveOffsets = new ArrayList<>();
        TreeMap<Long, Long> liveExtents = new TreeMap<>();
        // Phases bias towards filling or draining so that the arena visits full and empty states; small
        // sizes lean towards filling, so that thousands of holes grow the tree.
        double reserveBias = 0.6;
        double leastBias = small ? 0.45 : 0.3;
        int maxHeight = 0;
        for (int step = 0; step < STEPS; step++) {
            if (step % 5_000 == 0) {
                reserveBias = leastBias + 0.45 * random.nextDouble();
            }
            int dice = random.nextInt(1000);
            if (dice < 5) {
                long bad = -random.nextInt(2);
                assertThrows(IllegalArgumentException.class, () -> ours.reserve(bad));
            } else if (dice < 20 && !liveOffsets.isEmpty()) {
                long offset = liveOffsets.get(random.nextInt(liveOffsets.size())) + 256L * (1 + random.nextInt(3));
                if (!liveExtents.containsKey(offset)) {
                    assertTrue(ours.free(offset) != FreeOutcome.FREED, "free of a non-slot offset " + offset);
                }
            } else if (dice < 30) {
                long offset = 256L * random.nextInt((int) (CAPACITY / 256));
                if (!liveExtents.containsKey(offset)) {
                    assertTrue(ours.free(offset) != FreeOutcome.FREED, "free of a random offset " + offset);
                }
            } else if (liveOffsets.isEmpty() || random.nextDouble() < reserveBias) {
                long size = small ? 1 + random.nextInt(4096) : size(random);
                long expected = model.reserve(size);
                long actual = ours.reserve(size);
                assertEquals(expected, actual, "step " + step + ": reserve(" + size + ")");
                if (actual != SegmentedArena.FULL) {
                    long aligned = (size + 255) / 256 * 256;
                    Map.Entry<Long, Long> below = liveExtents.floorEntry(actual);
                    Map.Entry<Long, Long> above = liveExtents.ceilingEntry(actual);
                    assertTrue(below == null || below.getKey() + below.getValue() <= actual, "overlaps the slot below");
                    assertTrue(above == null || actual + aligned <= above.getKey(), "overlaps the slot above");
                    assertEquals(0, actual % 256, "alignment");
                    liveExtents.put(actual, aligned);
                    liveOffsets.add(actual);
                }
            } else {
                int i = random.nextInt(liveOffsets.size());
                long offset = liveOffsets.get(i);
                liveOffsets.set(i, liveOffsets.get(liveOffsets.size() - 1));
                liveOffsets.remove(liveOffsets.size() - 1);
                liveExtents.remove(offset);
                assertTrue(model.free(offset));
                assertEquals(FreeOutcome.FREED, ours.free(offset), "step " + step + ": free(" + offset + ")");
                if (random.nextInt(20) == 0) {
                    assertEquals(FreeOutcome.DOUBLE_FREE, ours.free(offset), "second free of " + offset);
                }
            }
            maxHeight = Math.max(maxHeight, ours.treeHeight());
            assertEquals(model.largestFreeBlockBytes(), ours.largestFreeBlockBytes(), "step " + step + ": largest");
            if (step % checkEvery == 0) {
                checkInvariants(ours, model, liveExtents, step);
            }
        }
        checkInvariants(ours, model, liveExtents, STEPS);
        if (small) {
            assertTrue(maxHeight >= 2, "the trace should grow the tree at least two levels, reached " + maxHeight);
        }
        for (long offset : liveOffsets) {
            assertEquals(FreeOutcome.FREED, ours.free(offset));
            assertTrue(model.free(offset));
        }
        liveExtents.clear();
        checkInvariants(ours, model, liveExtents, STEPS + 1);
        return ours;
    }

    // Mostly small, some large, a few exact powers of two (repeated sizes make exact fits).
    private static long size(SplittableRandom random) {
        int kind = random.nextInt(10);
        if (kind < 6) {
            return 1 + random.nextInt(64 << 10);
        }
        if (kind < 9) {
            return 4096L << random.nextInt(6);
        }
        return 1 + random.nextInt(4 << 20);
    }

    private static void checkInvariants(FirstFitAllocator ours, SortedListFirstFit model,
                                        TreeMap<Long, Long> live, int step) {
        List<long[]> blocks = new ArrayList<>();
        ours.forEachFreeBlock((offset, size) -> blocks.add(new long[] {offset, size}));
        assertEquals(model.freeBlocks(), blocks.size(), "step " + step + ": free block count");
        long free = 0;
        long largest = 0;
        for (int i = 0; i < blocks.size(); i++) {
            long[] b = blocks.get(i);
            assertEquals(model.freeBlockStart(i), b[0], "step " + step + ": free block " + i + " start");
            assertEquals(model.freeBlockSize(i), b[1], "step " + step + ": free block " + i + " size");
            assertTrue(b[1] > 0 && b[0] % 256 == 0 && b[1] % 256 == 0, "aligned, non-empty blocks");
            if (i > 0) {
                long[] prev = blocks.get(i - 1);
                assertTrue(prev[0] + prev[1] < b[0], "step " + step + ": adjacent or overlapping free blocks at " + b[0]);
            }
            free += b[1];
            largest = Math.max(largest, b[1]);
        }
        long used = live.values().stream().mapToLong(Long::longValue).sum();
        assertEquals(used, ours.usedBytes(), "step " + step + ": used bytes");
        assertEquals(CAPACITY, ours.usedBytes() + free, "step " + step + ": used + free = capacity");
        assertEquals(free, ours.freeBytes());
        assertEquals(largest, ours.largestFreeBlockBytes(), "step " + step + ": largest free block");
        assertEquals(live.size(), ours.liveSlots(), "step " + step + ": live slots");
        assertEquals(blocks.size(), ours.freeBlocks());
    }
}
