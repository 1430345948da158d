package io.mstar.transport.arena;

/**
 * The layout of a slot handle: a {@code long} that names a slot of a {@link SegmentedArena}, so that the
 * hot path allocates nothing (Netty's {@code PoolChunk} handles are the model).
 * <pre>
 *   63  62        52 51       40 39                              0
 *  +---+------------+-----------+--------------------------------+
 *  | 0 | generation |  position |          offset (bytes)        |
 *  +---+------------+-----------+--------------------------------+
 * </pre>
 * {@code position} indexes the arena's segment table; {@code generation} changes whenever a position gets
 * a new segment, so a stale handle to a dedicated segment that is gone is refused instead of freeing a slot
 * of the segment that replaced it. Bit 63 is zero, so no handle equals {@link SegmentedArena#FULL}.
 */
final class SlotHandle {
    static final int OFFSET_BITS = 40;
    static final int POSITION_BITS = 12;
    static final int GENERATION_BITS = 11;
    private static final long OFFSET_MASK = (1L << OFFSET_BITS) - 1;
    private static final int POSITION_MASK = (1 << POSITION_BITS) - 1;
    private static final int GENERATION_MASK = (1 << GENERATION_BITS) - 1;

    private SlotHandle() {
    }

    static long of(int generation, int position, long offset) {
        assert generation >= 0 && generation <= GENERATION_MASK && position >= 0 && position <= POSITION_MASK
            && offset >= 0 && offset <= OFFSET_MASK : "a field overflows its bits";
        return ((long) generation << (OFFSET_BITS + POSITION_BITS)) | ((long) position << OFFSET_BITS) | offset;
    }

    /** The byte offset of the slot inside its segment. */
    static long offset(long slot) {
        return slot & OFFSET_MASK;
    }

    static int position(long slot) {
        return (int) (slot >>> OFFSET_BITS) & POSITION_MASK;
    }

    static int generation(long slot) {
        return (int) (slot >>> (OFFSET_BITS + POSITION_BITS));
    }

    /** The generation a position's next segment gets. */
    static int nextGeneration(int generation) {
        return (generation + 1) & GENERATION_MASK;
    }
}
