package io.mstar.transport.shm;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

/**
 * The stamp behind a tensor's bytes in its slot: the uuid of the tensor that owns the slot now, so that a
 * reader can tell a slot that was freed and reused under it, whatever bug freed it.
 *
 * <pre>
 *   slot (producer's segment, at the descriptor's offset):
 *  +----------------------------+---------+--------------+--------------+
 *  | tensor bytes (nbytes)      | pad to 8| uuid msb (8) | uuid lsb (8) |
 *  +----------------------------+---------+--------------+--------------+
 *  ^ offset                               ^ {@link #at}(offset, nbytes)
 * </pre>
 * The producer writes the stamp when it reserves or claims the slot (before the descriptor can leave) and
 * clears it before the slot is freed, then fences, so the next owner's bytes come after the cleared stamp.
 * A reader checks the stamp against its descriptor before it hands the bytes over and again when its reader
 * is done, with a load fence between the bytes and the second check: a slot reused meanwhile shows another
 * stamp or none. Native byte order: both sides run on one machine.
 *
 * <p>The stamp is inside the slot, so a slot takes {@link #slotBytes}: tensors that tiled a segment exactly
 * (four of 64 MiB in 256 MiB) fit one fewer, and a segment-sized tensor gets a dedicated segment.
 */
public final class SlotStamp {
    /** Bytes of the stamp. */
    public static final int STAMP_BYTES = 16;
    private static final ValueLayout.OfLong WORD = ValueLayout.JAVA_LONG_UNALIGNED;
    /**
     * Test-only seam: {@code -Dmstar.test.noStampCheck=true} makes every stamp check pass, so a fault campaign
     * can show that the check is what refuses a reused slot's bytes.
     */
    static final boolean SKIP_CHECK = Boolean.getBoolean("mstar.test.noStampCheck");

    private SlotStamp() {
    }

    /** Where the stamp of a tensor of {@code nbytes} at {@code offset} lies: after its bytes, 8-aligned. */
    public static long at(long offset, long nbytes) {
        return offset + ((nbytes + 7) & ~7L);
    }

    /** Bytes a slot needs for a tensor of {@code nbytes} and its stamp. */
    public static long slotBytes(long nbytes) {
        return at(0, nbytes) + STAMP_BYTES;
    }

    /** Stamps the slot at {@code offset} with the tensor that owns it from now on. */
    public static void write(MemorySegment segment, long offset, long nbytes, long uuidMsb, long uuidLsb) {
        long at = at(offset, nbytes);
        segment.set(WORD, at, uuidMsb);
        segment.set(WORD, at + 8, uuidLsb);
    }

    /** Clears the stamp before the slot is freed; the next owner's writes come after it. */
    public static void clear(MemorySegment segment, long offset, long nbytes) {
        long at = at(offset, nbytes);
        segment.set(WORD, at, 0L);
        segment.set(WORD, at + 8, 0L);
        VarHandle.storeStoreFence();
    }

    /**
     * Whether the slot still belongs to the tensor: checked after every read of its bytes (the fence keeps
     * those reads before this one). False when the stamp lies outside the segment.
     */
    public static boolean holds(MemorySegment segment, long offset, long nbytes, long uuidMsb, long uuidLsb) {
        long at = at(offset, nbytes);
        if (SKIP_CHECK) {
            return true;
        }
        if (at < 0 || at > segment.byteSize() - STAMP_BYTES) {
            return false;
        }
        VarHandle.loadLoadFence();
        return segment.get(WORD, at) == uuidMsb && segment.get(WORD, at + 8) == uuidLsb;
    }
}
