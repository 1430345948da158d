package io.mstar.transport.arena;

/** What a free of an offset did. Only {@link #FREED} changed anything. */
public enum FreeOutcome {
    /** The slot starting at the offset was live and is free now. */
    FREED,
    /** The offset lies in free space: a second free of the same slot, or an offset never reserved. */
    DOUBLE_FREE,
    /** The offset is not the start of a live slot: outside the segment, unaligned, or inside another slot. */
    UNKNOWN_OFFSET
}
