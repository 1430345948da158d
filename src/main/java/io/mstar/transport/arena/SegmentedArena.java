package io.mstar.transport.arena;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.Deployment;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.Sweeper;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappingListener;
import io.mstar.transport.shm.SlotStamp;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A producer's arena: shared segments in the shared-memory directory, each with its own
 * {@link FirstFitAllocator}, grown one segment at a time up to a cap. Segments never move: a slot's
 * address stays valid until the slot is freed.
 *
 * <h2>Reserve</h2>
 * The first regular segment (in creation order) whose largest free block fits takes the slot: an O(1)
 * check per segment. When none fits, the arena grows by one segment while it is under the cap and the
 * file system can back it; otherwise it answers {@link #FULL}, the caller's cue for the next rung of the
 * capacity ladder. The first segment is made by the first reserve, or ahead of it by {@link #prepare()}.
 * Before any of that, a size freed recently is served from {@link RecentFrees}: the slot freed last,
 * still in the caches; those kept slots go back to their trees before a reserve may grow or fail.
 * A request larger than one segment gets a dedicated segment of its own (page-aligned) size. Every
 * segment's bytes, dedicated ones included, count against one byte ceiling, {@code maxSegments x
 * segmentBytes}, the figure operators size the shared-memory directory from: past it a request is
 * {@link #FULL} like any other. Once a dedicated segment's slot is freed the segment stays, idle, for the
 * next large request it can hold (creating one costs a commit and page faults); idle ones are unlinked
 * when the ceiling needs room.
 *
 * <h2>Slot handles</h2>
 * A slot is a {@code long} laid out as {@link SlotHandle} says, so the hot path allocates nothing.
 *
 * <h2>Thread safety</h2>
 * All methods may be called from any thread (a sender and an ACK thread, typically). One lock guards
 * the segment table, the allocators and the counters, which keeps {@link #stats()} consistent; growth
 * (creating and committing a segment) happens under it too, so it briefly delays frees.
 *
 * <p>One class on purpose: the segment table, the allocators, idle dedicated segments and the counters
 * change together under its one lock; the table itself is {@link SegmentTable} (and its occupancy bars
 * {@link OccupancyBar}), making and removing segments within the ceiling and the node budget {@link SegmentSpace},
 * the handle layout {@link SlotHandle} and the capacity warnings {@link CapacityWarnings}.
 */
public final class SegmentedArena implements AutoCloseable {
    /** {@link #reserve} returns this when the arena is at its cap or the file system is full. */
    public static final long FULL = -1L;
    /** Alignment of every slot. */
    public static final int ALIGNMENT_BYTES = FirstFitAllocator.ALIGNMENT_BYTES;

    private static final Logger LOG = LoggerFactory.getLogger(SegmentedArena.class);
    private static final Set<String> OPENED = ConcurrentHashMap.newKeySet();
    private static final long PAGE_BYTES = 4096;

    private final Owner owner;
    private final Path dir;
    private final long segmentBytes;
    private final RecentFrees recentFrees; // regular segments' slots freed last, reused first
    private final int maxSegments;

    private final Sweeper sweeper;
    private final CapacityWarnings warnings = new CapacityWarnings();
    private final SegmentSpace space; // where segments come from: the directory, the node budget
    private final SegmentTable table; // the segments by position; segments' bytes never above the ceiling
    private final CloseOnce closer = new CloseOnce();

    private long reserves;
    private long frees;
    private long failedReserves;
    private long refusedFrees;

    /**
     * Opens an arena with the sizes of the deployment's configuration; it makes no segment before
     * {@link #prepare()} or the first reserve.
     *
     * @throws ConfigurationException when one arena's ceiling exceeds the shared-memory file system
     */
    public static SegmentedArena open(Deployment deployment) {
        TransportConfig config = deployment.config();
        SegmentedArena arena = new SegmentedArena(Owner.of(deployment), config.segmentBytes(), config.maxSegments(),
            config.reclaimInterval(), config.nodeMaxMb() << 20); // the directory is checked first: nothing is said
                                                                    // to be open before
        boolean first = OPENED.add(deployment.namespace() + "/" + deployment.entity()); // a landing arena says it once
        String line = "arena opened: entity={}, namespace={}, dir={}, segments={} x {} MiB, spill={}";
        Object[] values = {deployment.entity(), deployment.namespace(), config.shmDir(), config.maxSegments(),
            config.segmentBytes() >> 20, config.spill() ? "on" : "off (strict)"};
        if (first) {
            LOG.info(line, values);
        } else {
            LOG.debug(line, values);
        }
        LOG.debug("arena configuration: entity={}, {}", deployment.entity(), config.describe());
        return arena;
    }

    /** An arena of a new owner, sweeping its directory every {@link TransportConfig#RECLAIM_INTERVAL_DEFAULT}. */
    public SegmentedArena(Path dir, Namespace namespace, String entity, long segmentBytes, int maxSegments) {
        this(Owner.create(dir, namespace, entity), segmentBytes, maxSegments, TransportConfig.RECLAIM_INTERVAL_DEFAULT);
    }

    /**
     * @param owner           whose segments these are (names and locks)
     * @param segmentBytes    size of each regular segment, a positive multiple of the page size
     * @param maxSegments     growth cap, dedicated segments included
     * @param reclaimInterval how often this process sweeps dead owners' files ({@link Sweeper})
     */
    public SegmentedArena(Owner owner, long segmentBytes, int maxSegments, Duration reclaimInterval) {
        this(owner, segmentBytes, maxSegments, reclaimInterval, 0);
    }

    /**
     * As above, its segments committed to the deployment's node budget of {@code nodeBudgetBytes} first (0: no
     * node budget).
     */
    public SegmentedArena(Owner owner, long segmentBytes, int maxSegments, Duration reclaimInterval,
                          long nodeBudgetBytes) {
        if (segmentBytes <= 0 || segmentBytes % PAGE_BYTES != 0 || segmentBytes > FirstFitAllocator.MAX_CAPACITY_BYTES) {
            throw new IllegalArgumentException("segment size must be a positive multiple of " + PAGE_BYTES
                + " up to " + FirstFitAllocator.MAX_CAPACITY_BYTES + ": segmentBytes=" + segmentBytes);
        }
        if (maxSegments < 1 || maxSegments > TransportConfig.MAX_MAX_SEGMENTS) {
            throw new IllegalArgumentException("maxSegments must be from 1 to " + TransportConfig.MAX_MAX_SEGMENTS
                + ": maxSegments=" + maxSegments);
        }
        this.owner = owner;
        this.dir = owner.dir();
        this.segmentBytes = segmentBytes;
        this.maxSegments = maxSegments;
        this.table = new SegmentTable(maxSegments);
        this.recentFrees = new RecentFrees(segmentBytes / 4);
        this.space = new SegmentSpace(owner, table, ceilingBytes(), nodeBudgetBytes, warnings);
        space.checkCeiling(maxSegments, segmentBytes);
        this.sweeper = Sweeper.join(dir, reclaimInterval);
        boolean ok = false;
        try {
            ShutdownCleanup.register(this); // no segment yet: the first reserve, or prepare(), makes one
            ok = true;
        } finally {
            if (!ok) {
                close();
            }
        }
    }

    /**
     * Makes the first regular segment now unless there is one, so that the first send does not pay for it;
     * a process that only receives never calls this and commits no segment. If the tmpfs cannot back it
     * now, the first reserve tries again.
     */
    public synchronized void prepare() {
        checkOpen();
        for (int p = 0; p < table.positions(); p++) {
            if (table.segment(p) != null && !table.isDedicated(p)) {
                return;
            }
        }
        space.grow(segmentBytes, false);
    }

    /**
     * Reserves a slot of at least {@code sizeBytes}, growing the arena when no segment has room.
     *
     * @return the slot handle, or {@link #FULL}
     * @throws IllegalArgumentException when {@code sizeBytes} is zero or negative
     * @throws IllegalStateException    when the arena is closed
     */
    public synchronized long reserve(long sizeBytes) {
        checkOpen();
        if (sizeBytes <= 0) {
            failedReserves++;
            throw new IllegalArgumentException("reserve size must be positive: sizeBytes=" + sizeBytes);
        }
        if (sizeBytes > segmentBytes) {
            return reserveDedicated(sizeBytes);
        }
        long aligned = alignUp(sizeBytes, ALIGNMENT_BYTES);
        long kept = recentFrees.take(aligned);
        if (kept >= 0) {
            reserves++;
            return kept;
        }
        long slot = reserveInSegments(sizeBytes, aligned);
        if (slot < 0 && !recentFrees.isEmpty()) { // the kept slots go back to their trees before the arena grows
            returnRecentFrees();
            slot = reserveInSegments(sizeBytes, aligned);
        }
        if (slot >= 0) {
            return slot;
        }
        long freeBytes = 0;
        for (int p = 0; p < table.positions(); p++) {
            if (table.isRegular(p)) {
                freeBytes += table.allocator(p).freeBytes();
            }
        }
        int p = space.grow(segmentBytes, false);
        if (p < 0) {
            failedReserves++;
            if (freeBytes >= aligned) {
                warnings.held(CapacityWarnings.Kind.FRAGMENTATION, "fragmentation: the arena's free bytes would hold"
                    + " the tensor but no free block does: entity={}, sizeBytes={}, freeBytes={}: ACK sooner, or use"
                    + " fewer sizes per segment (a larger {})", owner.entity(), sizeBytes, freeBytes,
                    TransportConfig.SEGMENT_MB);
            }
            return FULL;
        }
        return reserved(p, table.allocator(p).reserve(sizeBytes));
    }

    // The first regular segment whose largest free block fits, or -1.
    private long reserveInSegments(long sizeBytes, long aligned) {
        for (int p = 0; p < table.positions(); p++) {
            FirstFitAllocator allocator = table.allocator(p);
            if (allocator != null && !table.isDedicated(p) && !table.isRetired(p) && allocator.largestFreeBlockBytes() >= aligned) {
                return reserved(p, allocator.reserve(sizeBytes));
            }
        }
        return -1;
    }

    private void returnRecentFrees() {
        recentFrees.drain(slot -> {
            int p = table.livePosition(slot);
            if (p >= 0) {
                table.allocator(p).free(offset(slot));
            }
        });
    }

    // The smallest idle dedicated segment that holds it, else a new one.
    private long reserveDedicated(long sizeBytes) {
        int best = -1;
        for (int p = 0; p < table.positions(); p++) {
            if (table.isIdleDedicated(p) && table.allocator(p).capacityBytes() >= sizeBytes
                && (best < 0 || table.allocator(p).capacityBytes() < table.allocator(best).capacityBytes())) {
                best = p;
            }
        }
        int p = best >= 0 ? best : space.grow(alignUp(sizeBytes, PAGE_BYTES), true);
        if (p < 0) {
            failedReserves++;
            return FULL;
        }
        return reserved(p, table.allocator(p).reserve(sizeBytes));
    }

    private long reserved(int position, long offset) {
        reserves++;
        return table.handle(position, offset);
    }

    /**
     * Clears the stamp of a tensor of {@code nbytes} in a live slot ({@link SlotStamp}), then frees the slot:
     * a reader still looking at it sees that it is no longer that tensor's.
     */
    public synchronized FreeOutcome free(long slot, long nbytes) {
        int p = table.livePosition(slot);
        if (p >= 0 && !table.isRetired(p) && !recentFrees.holds(slot) && SlotStamp.at(offset(slot), nbytes) + SlotStamp.STAMP_BYTES
            <= offset(slot) + table.allocator(p).slotBytes(offset(slot))) {
            try {
                SlotStamp.clear(table.segment(p).memory(), offset(slot), nbytes);
            } catch (InternalError fault) { // shrunk under us: see retireShrunk
                retireShrunk(slot, fault);
            }
        }
        return free(slot);
    }

    /** Frees a slot; a stale, double or unknown handle changes nothing and is counted. */
    public synchronized FreeOutcome free(long slot) {
        checkOpen();
        int p = table.livePosition(slot);
        if (p < 0) {
            refusedFrees++;
            return FreeOutcome.UNKNOWN_OFFSET;
        }
        if (recentFrees.holds(slot)) {
            refusedFrees++;
            return FreeOutcome.DOUBLE_FREE;
        }
        long slotBytes = table.isDedicated(p) || table.isRetired(p) ? -1 : table.allocator(p).slotBytes(offset(slot));
        if (slotBytes > 0 && recentFrees.keep(slot, slotBytes)) {
            frees++;
            return FreeOutcome.FREED;
        }
        FreeOutcome outcome = table.allocator(p).free(offset(slot));
        if (outcome != FreeOutcome.FREED) {
            refusedFrees++;
            return outcome;
        }
        frees++;
        if (table.isRetired(p) && table.allocator(p).liveSlots() == 0) {
            space.remove(p);
        }
        return outcome;
    }

    /**
     * The segment of a live slot was shrunk under us (another process of this user truncated its file: a
     * write there faulted): it takes no new slot from now on, its name goes (so no consumer maps it again),
     * and it is removed when its last slot is freed. Tensors already in it are refused by their readers.
     */
    public synchronized void retireShrunk(long slot, Throwable fault) {
        int p = table.livePosition(slot);
        if (p < 0 || table.isRetired(p)) {
            return;
        }
        returnRecentFrees(); // none of its slots may wait there to be handed out again
        table.retire(p);
        LOG.warn("an arena segment was shrunk under its producer (another process of this user truncated it): it is"
            + " retired, and the arena goes on in another: segment={}, {}", table.segment(p).name(), fault.toString());
        table.segment(p).unlink();
    }

    /** The writable memory of a live slot, {@code sizeBytes} long. */
    public synchronized MemorySegment slotMemory(long slot, long sizeBytes) {
        checkOpen();
        int p = table.livePosition(slot);
        long slotBytes = p < 0 || recentFrees.holds(slot) ? -1 : table.allocator(p).slotBytes(offset(slot));
        if (slotBytes < sizeBytes || sizeBytes < 0) {
            throw new IllegalArgumentException("not a live slot of this size: slot=0x" + Long.toHexString(slot)
                + ", sizeBytes=" + sizeBytes + ", slotBytes=" + slotBytes);
        }
        return table.segment(p).slice(offset(slot), sizeBytes);
    }

    /** The file name of the segment holding a live slot. */
    public synchronized String segmentName(long slot) {
        return segmentOf(slot).name();
    }

    /**
     * Tells {@code listener} of every segment mapped now and later, and before each is unmapped (the CUDA
     * pinning hooks in here).
     */
    public synchronized void mappingListener(MappingListener listener) {
        space.mappingListener(listener);
    }

    /** The whole writable mapping of the segment holding a live slot; the slot starts at {@link #offset}. */
    public synchronized MemorySegment segmentMemory(long slot) {
        return segmentOf(slot).memory();
    }

    /**
     * The first {@code nbytes} of a slot its caller just reserved (unchecked, unlike {@link #slotMemory}): the
     * same object for the same slot and size (see {@link MappedSegment#slice}).
     */
    synchronized MemorySegment reservedMemory(long slot, long nbytes) {
        return segmentOf(slot).slice(offset(slot), nbytes);
    }

    /** The address of a live slot's first byte, for native copies (the mapping never moves). */
    public synchronized long slotAddress(long slot) {
        return segmentOf(slot).memory().address() + offset(slot);
    }

    private MappedSegment segmentOf(long slot) {
        checkOpen(); // a send racing close learns that the arena closed, not that its slot is unknown
        int p = table.livePosition(slot);
        if (p < 0) {
            throw new IllegalArgumentException("not a slot of a live segment: slot=0x" + Long.toHexString(slot));
        }
        return table.segment(p);
    }

    /** The byte offset of a slot inside its segment. */
    public static long offset(long slot) {
        return SlotHandle.offset(slot);
    }

    /** An atomic snapshot of sizes and counters. */
    public synchronized ArenaStats stats() {
        returnRecentFrees(); // the figures are the trees' own
        return table.stats(reserves, frees, failedReserves, refusedFrees);
    }

    /**
     * Each segment's occupancy as a bar of {@code cells} characters, in address order: {@code #} all used,
     * {@code .} all free, {@code +} part of each; the segments in order, separated by commas.
     */
    public synchronized String occupancyMap(int cells) {
        returnRecentFrees();
        return table.occupancyMap(cells);
    }

    /** Whose segments these are. */
    public Owner owner() {
        return owner;
    }

    public String entity() {
        return owner.entity();
    }

    public long segmentBytes() {
        return segmentBytes;
    }

    public int maxSegments() {
        return maxSegments;
    }

    /** The most bytes of segments this arena holds at once, dedicated ones included: {@code maxSegments x segmentBytes}. */
    public long ceilingBytes() {
        return maxSegments * segmentBytes;
    }

    /**
     * Unlinks every segment's file, keeping the mappings: slots stay usable, peers keep what they mapped.
     * Segments grown later get new files, which {@link #close()} unlinks.
     */
    public synchronized void unlinkSegments() {
        for (int p = 0; p < table.positions(); p++) {
            if (table.segment(p) != null) {
                table.segment(p).unlink();
            }
        }
    }

    /** Unlinks and unmaps every segment. Idempotent; slots must no longer be read or written. */
    @Override
    public void close() {
        closer.close(this::removeAll);
    }

    private synchronized void removeAll() {
        ShutdownCleanup.unregister(this);
        RuntimeException failure = null;
        for (int p = 0; p < table.positions(); p++) {
            if (table.segment(p) != null) {
                try {
                    space.remove(p);
                } catch (RuntimeException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        }
        space.close();
        sweeper.leave();
        if (failure != null) {
            throw failure;
        }
    }

    /** The node budget's bytes and what every arena committed to it, or null without one. */
    public synchronized long[] nodeBudget() {
        return space.nodeBudget();
    }

    /** The operator warnings and how often each condition held. */
    CapacityWarnings warnings() {
        return warnings;
    }

    /** Whether close has begun: every slot went with it. */
    boolean isClosed() {
        return closer.isClosed();
    }

    /** @throws IllegalStateException once the arena is closed */
    void checkOpen() {
        if (closer.isClosed()) {
            throw new IllegalStateException("arena is closed: entity=" + owner.entity() + ", namespace=" + owner.namespace());
        }
    }

    static long alignUp(long value, long alignment) {
        return (value + alignment - 1) & -alignment;
    }

}
