package io.mstar.transport.arena;

/**
 * One segment's occupancy as a bar of characters, in address order ({@code mstar-shm stats --map}): {@code #}
 * a cell all used, {@code .} all free, {@code +} part of each.
 */
final class OccupancyBar {
    private OccupancyBar() {
    }

    /** Appends {@code allocator}'s bar of {@code cells} characters to {@code map}. */
    static void append(StringBuilder map, FirstFitAllocator allocator, int cells) {
        long capacity = allocator.capacityBytes();
        long[] free = new long[cells];
        allocator.forEachFreeBlock((offset, size) -> {
            for (int c = (int) (offset * cells / capacity); c < cells && cellStart(c, capacity, cells) < offset + size; c++) {
                long from = Math.max(offset, cellStart(c, capacity, cells));
                long to = Math.min(offset + size, cellStart(c + 1, capacity, cells));
                free[c] += Math.max(0, to - from);
            }
        });
        for (int c = 0; c < cells; c++) {
            long cellBytes = cellStart(c + 1, capacity, cells) - cellStart(c, capacity, cells);
            map.append(free[c] == 0 ? '#' : free[c] >= cellBytes ? '.' : '+');
        }
    }

    private static long cellStart(int cell, long capacity, int cells) {
        return capacity * cell / cells;
    }
}
