package io.mstar.transport.arena;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** Exact cases with offsets: each one names the blocks it expects, in address order. */
class FirstFitAllocatorTest {
    private static final long K = 1024;

    private static List<String> freeBlocks(FirstFitAllocator a) {
        List<String> blocks = new ArrayList<>();
        a.forEachFreeBlock((offset, size) -> blocks.add(kib(offset) + "+" + kib(size)));
        return blocks;
    }

    // KiB, with a fraction only where there is one: 1280 bytes is "1.25".
    private static String kib(long bytes) {
        return bytes % K == 0 ? Long.toString(bytes / K) : Double.toString(bytes / (double) K);
    }

    /** Fills a 10 KiB allocator with ten 1 KiB slots at offsets 0, 1, ... 9 KiB. */
    private static FirstFitAllocator tenSlots() {
        FirstFitAllocator a = new FirstFitAllocator(10 * K);
        for (int i = 0; i < 10; i++) {
            assertEquals(i * K, a.reserve(K));
        }
        assertEquals(List.of(), freeBlocks(a));
        assertEquals(0, a.largestFreeBlockBytes());
        return a;
    }

    @Test
    void reservesAlignedLowestAddressFirst() {
        FirstFitAllocator a = new FirstFitAllocator(64 * K);
        assertEquals(0, a.reserve(1));
        assertEquals(256, a.reserve(256));
        assertEquals(512, a.reserve(257));
        assertEquals(1024, a.reserve(100));
        assertEquals(List.of("1.25+62.75"), freeBlocks(a));
        assertEquals(4, a.liveSlots());
        assertEquals(5 * 256, a.usedBytes());
        assertEquals(512, a.slotBytes(512));
        assertEquals(-1, a.slotBytes(768));
    }

    @Test
    void freeBetweenTwoFreeNeighboursMergesAllThree() {
        FirstFitAllocator a = tenSlots();
        a.free(3 * K);
        a.free(5 * K);
        assertEquals(List.of("3+1", "5+1"), freeBlocks(a));
        assertEquals(FreeOutcome.FREED, a.free(4 * K));
        assertEquals(List.of("3+3"), freeBlocks(a));
        assertEquals(1, a.freeBlocks());
        assertEquals(3 * K, a.largestFreeBlockBytes());
    }

    @Test
    void freeNextToOneNeighbourExtendsIt() {
        FirstFitAllocator a = tenSlots();
        a.free(3 * K);
        a.free(4 * K); // joins its lower neighbour
        assertEquals(List.of("3+2"), freeBlocks(a));
        a.free(7 * K);
        a.free(6 * K); // joins its upper neighbour
        assertEquals(List.of("3+2", "6+2"), freeBlocks(a));
        a.free(5 * K);
        assertEquals(List.of("3+5"), freeBlocks(a));
    }

    @Test
    void firstAndLastBlocksCoalesceAtTheEdges() {
        FirstFitAllocator a = tenSlots();
        a.free(0);
        a.free(9 * K);
        assertEquals(List.of("0+1", "9+1"), freeBlocks(a));
        a.free(K);
        a.free(8 * K);
        assertEquals(List.of("0+2", "8+2"), freeBlocks(a));
        for (int i = 2; i < 8; i++) {
            a.free(i * K);
        }
        assertEquals(List.of("0+10"), freeBlocks(a));
        assertEquals(10 * K, a.largestFreeBlockBytes());
        assertEquals(0, a.usedBytes());
    }

    @Test
    void checkerboardOfHolesThenOneLargeRequest() {
        FirstFitAllocator a = new FirstFitAllocator(64 * K);
        for (int i = 0; i < 64; i++) {
            assertEquals(i * K, a.reserve(K));
        }
        for (int i = 0; i < 64; i += 2) {
            a.free(i * K);
        }
        assertEquals(32, a.freeBlocks());
        assertEquals(K, a.largestFreeBlockBytes());
        assertEquals(SegmentedArena.FULL, a.reserve(2 * K), "32 holes of 1 KiB cannot hold 2 KiB");
        assertEquals(1, a.failedReserves());
        for (int i = 1; i < 64; i += 4) {
            a.free(i * K); // joins holes 4j, 4j+1, 4j+2 into 3 KiB runs
        }
        assertEquals(3 * K, a.largestFreeBlockBytes());
        assertEquals(0, a.reserve(2 * K + 1), "the lowest 3 KiB run takes it");
        assertEquals(List.of("2.25+0.75"), freeBlocks(a).subList(0, 1));
        assertEquals(4 * K, a.reserve(3 * K));
    }

    @Test
    void exactFitRemovesTheBlockAndLowerHoleWinsOverLarger() {
        FirstFitAllocator a = tenSlots();
        a.free(2 * K);
        a.free(6 * K);
        a.free(7 * K);
        assertEquals(List.of("2+1", "6+2"), freeBlocks(a));
        assertEquals(2 * K, a.reserve(K), "lowest hole, exact fit");
        assertEquals(List.of("6+2"), freeBlocks(a));
        assertEquals(6 * K, a.reserve(300), "rounded up to 512 bytes");
        List<Long> blocks = new ArrayList<>();
        a.forEachFreeBlock((offset, size) -> blocks.addAll(List.of(offset, size)));
        assertEquals(List.of(6 * K + 512, 2 * K - 512), blocks);
    }

    @Test
    void refusesDoubleFreeUnknownOffsetsAndBadSizes() {
        FirstFitAllocator a = new FirstFitAllocator(16 * K);
        long x = a.reserve(2 * K);
        long y = a.reserve(2 * K);
        assertEquals(FreeOutcome.FREED, a.free(x));
        assertEquals(FreeOutcome.DOUBLE_FREE, a.free(x));
        assertEquals(FreeOutcome.UNKNOWN_OFFSET, a.free(y + 256), "inside a live slot");
        assertEquals(FreeOutcome.UNKNOWN_OFFSET, a.free(y + 1), "unaligned");
        assertEquals(FreeOutcome.UNKNOWN_OFFSET, a.free(-256));
        assertEquals(FreeOutcome.UNKNOWN_OFFSET, a.free(16 * K));
        assertEquals(FreeOutcome.DOUBLE_FREE, a.free(8 * K), "never reserved, in free space");
        assertEquals(6, a.refusedFrees());
        assertThrows(IllegalArgumentException.class, () -> a.reserve(0));
        assertThrows(IllegalArgumentException.class, () -> a.reserve(-5));
        assertEquals(2, a.failedReserves());
        // Nothing above changed the structure.
        assertEquals(List.of("0+2", "4+12"), freeBlocks(a));
        assertEquals(1, a.liveSlots());
        assertEquals(FreeOutcome.FREED, a.free(y));
        assertEquals(List.of("0+16"), freeBlocks(a));
    }

    @Test
    void requestLargerThanCapacityIsFull() {
        FirstFitAllocator a = new FirstFitAllocator(4 * K);
        assertEquals(SegmentedArena.FULL, a.reserve(4 * K + 1));
        assertEquals(SegmentedArena.FULL, a.reserve(Long.MAX_VALUE));
        assertEquals(0, a.reserve(4 * K));
        assertEquals(SegmentedArena.FULL, a.reserve(1));
    }

    @Test
    void rejectsCapacityThatIsNotAligned() {
        assertThrows(IllegalArgumentException.class, () -> new FirstFitAllocator(1000));
        assertThrows(IllegalArgumentException.class, () -> new FirstFitAllocator(0));
    }
}
