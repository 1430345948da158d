package io.mstar.transport.arena;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.Deployment;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.Sweeper;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappingListener;
import io.mstar.transport.shm.ShmFullException;
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
 * change together under its one lock; the handle layout is {@link SlotHandle}'s and the capacity
 * warnings are {@link CapacityWarnings}'.
 */
public final class SegmentedArena implements AutoCloseable {
    /** {@link #reserve} returns this when the arena is at its cap or the file system is full. */
    public static final long FULL = -1L;
    /** Alignment of every slot. */
    public static final int ALIGNMENT_BYTES = FirstFitAllocator.ALIGNMENT_BYTES;

    private static final Logger LOG = LoggerFactory.getLogger(SegmentedArena.class);
    private static final Set<String> OPENED = ConcurrentHashMap.newKeySet();
    private static final long PAGE_BYTES = 4096;
    private static final int NAME_ATTEMPTS = 8;

    private final Owner owner;
    private final Path dir;
    private final long segmentBytes;
    private final RecentFrees recentFrees; // regular segments' slots freed last, reused first
    private final int maxSegments;

    private final Sweeper sweeper;
    private final CapacityWarnings warnings = new CapacityWarnings();
    private final MappedSegment[] segments;
    private final FirstFitAllocator[] allocators;
    private final boolean[] dedicated;
    private final boolean[] retired; // shrunk under us by another process: no new slots, removed once empty
    private final int[] generations;
    private int positionsInUse; // positions below this may hold a segment
    private int segmentCount;
    private long segmentsBytes; // every segment's size, dedicated ones included: never above the ceiling
    private int nextIndex;
    private final CloseOnce closer = new CloseOnce();
    private boolean shmFullWarned;
    private MappingListener listener = MappingListener.NONE;

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
            config.reclaimInterval()); // the directory is checked first: nothing is said to be open before
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
        this.segments = new MappedSegment[maxSegments];
        this.allocators = new FirstFitAllocator[maxSegments];
        this.dedicated = new boolean[maxSegments];
        this.retired = new boolean[maxSegments];
        this.generations = new int[maxSegments];
        this.recentFrees = new RecentFrees(segmentBytes / 4);
        checkCeiling();
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

    private void checkCeiling() {
        Posix.FileSystemSpace space;
        try {
            space = Posix.statvfs(dir.toString());
        } catch (NativeCallException e) {
            throw new ConfigurationException("shared-memory directory is not usable: " + TransportConfig.SHM_DIR
                + "=" + dir + ", " + e.getMessage() + ": create it or point " + TransportConfig.SHM_DIR
                + " at a tmpfs directory");
        }
        long ceiling = ceilingBytes();
        if (ceiling > space.totalBytes()) {
            throw new ConfigurationException("arena ceiling exceeds the shared-memory file system: dir=" + dir
                + ", fileSystemBytes=" + space.totalBytes() + " (" + mib(space.totalBytes()) + "), ceilingBytes="
                + ceiling + " (" + maxSegments + " segments x " + mib(segmentBytes) + "): give the container a larger"
                + " shared-memory size (docker --shm-size, a larger emptyDir medium: Memory) or lower "
                + TransportConfig.MAX_SEGMENTS + " or " + TransportConfig.SEGMENT_MB);
        }
        if (ceiling > space.availableBytes()) {
            warnings.held(CapacityWarnings.Kind.CEILING_ABOVE_FREE_SPACE, "arena ceiling exceeds the free shared"
                    + " memory; growth will stop early and the arena will spill: dir={}, availableBytes={} ({}),"
                    + " ceilingBytes={} ({})", dir, space.availableBytes(), mib(space.availableBytes()), ceiling,
                mib(ceiling));
        }
    }

    /**
     * Makes the first regular segment now unless there is one, so that the first send does not pay for it;
     * a process that only receives never calls this and commits no segment. If the tmpfs cannot back it
     * now, the first reserve tries again.
     */
    public synchronized void prepare() {
        checkOpen();
        for (int p = 0; p < positionsInUse; p++) {
            if (segments[p] != null && !dedicated[p]) {
                return;
            }
        }
        grow(segmentBytes, false);
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
        for (int p = 0; p < positionsInUse; p++) {
            if (allocators[p] != null && !dedicated[p] && !retired[p]) {
                freeBytes += allocators[p].freeBytes();
            }
        }
        int p = grow(segmentBytes, false);
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
        return reserved(p, allocators[p].reserve(sizeBytes));
    }

    // The first regular segment whose largest free block fits, or -1.
    private long reserveInSegments(long sizeBytes, long aligned) {
        for (int p = 0; p < positionsInUse; p++) {
            FirstFitAllocator allocator = allocators[p];
            if (allocator != null && !dedicated[p] && !retired[p] && allocator.largestFreeBlockBytes() >= aligned) {
                return reserved(p, allocator.reserve(sizeBytes));
            }
        }
        return -1;
    }

    private void returnRecentFrees() {
        recentFrees.drain(slot -> {
            int p = livePosition(slot);
            if (p >= 0) {
                allocators[p].free(offset(slot));
            }
        });
    }

    // The smallest idle dedicated segment that holds it, else a new one.
    private long reserveDedicated(long sizeBytes) {
        int best = -1;
        for (int p = 0; p < positionsInUse; p++) {
            if (isIdleDedicated(p) && allocators[p].capacityBytes() >= sizeBytes
                && (best < 0 || allocators[p].capacityBytes() < allocators[best].capacityBytes())) {
                best = p;
            }
        }
        int p = best >= 0 ? best : grow(alignUp(sizeBytes, PAGE_BYTES), true);
        if (p < 0) {
            failedReserves++;
            return FULL;
        }
        return reserved(p, allocators[p].reserve(sizeBytes));
    }

    private boolean isIdleDedicated(int p) {
        return segments[p] != null && dedicated[p] && !retired[p] && allocators[p].liveSlots() == 0;
    }

    private long reserved(int position, long offset) {
        reserves++;
        return SlotHandle.of(generations[position], position, offset);
    }

    /**
     * Clears the stamp of a tensor of {@code nbytes} in a live slot ({@link SlotStamp}), then frees the slot:
     * a reader still looking at it sees that it is no longer that tensor's.
     */
    public synchronized FreeOutcome free(long slot, long nbytes) {
        int p = livePosition(slot);
        if (p >= 0 && !retired[p] && !recentFrees.holds(slot) && SlotStamp.at(offset(slot), nbytes) + SlotStamp.STAMP_BYTES
            <= offset(slot) + allocators[p].slotBytes(offset(slot))) {
            try {
                SlotStamp.clear(segments[p].memory(), offset(slot), nbytes);
            } catch (InternalError fault) { // shrunk under us: see retireShrunk
                retireShrunk(slot, fault);
            }
        }
        return free(slot);
    }

    /** Frees a slot; a stale, double or unknown handle changes nothing and is counted. */
    public synchronized FreeOutcome free(long slot) {
        checkOpen();
        int p = livePosition(slot);
        if (p < 0) {
            refusedFrees++;
            return FreeOutcome.UNKNOWN_OFFSET;
        }
        if (recentFrees.holds(slot)) {
            refusedFrees++;
            return FreeOutcome.DOUBLE_FREE;
        }
        long slotBytes = dedicated[p] || retired[p] ? -1 : allocators[p].slotBytes(offset(slot));
        if (slotBytes > 0 && recentFrees.keep(slot, slotBytes)) {
            frees++;
            return FreeOutcome.FREED;
        }
        FreeOutcome outcome = allocators[p].free(offset(slot));
        if (outcome != FreeOutcome.FREED) {
            refusedFrees++;
            return outcome;
        }
        frees++;
        if (retired[p] && allocators[p].liveSlots() == 0) {
            removeSegment(p);
        }
        return outcome;
    }

    /**
     * The segment of a live slot was shrunk under us (another process of this user truncated its file: a
     * write there faulted): it takes no new slot from now on, its name goes (so no consumer maps it again),
     * and it is removed when its last slot is freed. Tensors already in it are refused by their readers.
     */
    public synchronized void retireShrunk(long slot, Throwable fault) {
        int p = livePosition(slot);
        if (p < 0 || retired[p]) {
            return;
        }
        returnRecentFrees(); // none of its slots may wait there to be handed out again
        retired[p] = true;
        LOG.warn("an arena segment was shrunk under its producer (another process of this user truncated it): it is"
            + " retired, and the arena goes on in another: segment={}, {}", segments[p].name(), fault.toString());
        segments[p].unlink();
    }

    /** The writable memory of a live slot, {@code sizeBytes} long. */
    public synchronized MemorySegment slotMemory(long slot, long sizeBytes) {
        checkOpen();
        int p = livePosition(slot);
        long slotBytes = p < 0 || recentFrees.holds(slot) ? -1 : allocators[p].slotBytes(offset(slot));
        if (slotBytes < sizeBytes || sizeBytes < 0) {
            throw new IllegalArgumentException("not a live slot of this size: slot=0x" + Long.toHexString(slot)
                + ", sizeBytes=" + sizeBytes + ", slotBytes=" + slotBytes);
        }
        return segments[p].slice(offset(slot), sizeBytes);
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
        this.listener = listener;
        for (int p = 0; p < positionsInUse; p++) {
            if (segments[p] != null) {
                listener.mapped(segments[p]);
            }
        }
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
        int p = livePosition(slot);
        if (p < 0) {
            throw new IllegalArgumentException("not a slot of a live segment: slot=0x" + Long.toHexString(slot));
        }
        return segments[p];
    }

    /** The byte offset of a slot inside its segment. */
    public static long offset(long slot) {
        return SlotHandle.offset(slot);
    }

    /** An atomic snapshot of sizes and counters. */
    public synchronized ArenaStats stats() {
        returnRecentFrees(); // the figures are the trees' own
        long capacity = 0;
        long used = 0;
        long largest = 0;
        long largestPerSegment = 0; // a block cannot span segments: each segment's largest counts whole
        long live = 0;
        for (int p = 0; p < positionsInUse; p++) {
            FirstFitAllocator allocator = allocators[p];
            if (allocator != null) {
                capacity += allocator.capacityBytes();
                used += allocator.usedBytes();
                largest = Math.max(largest, allocator.largestFreeBlockBytes());
                largestPerSegment += allocator.largestFreeBlockBytes();
                live += allocator.liveSlots();
            }
        }
        long free = capacity - used;
        double fragmentation = free == 0 ? 0.0 : 1.0 - (double) largestPerSegment / free;
        return new ArenaStats(segmentCount, capacity, used, free, largest, fragmentation, live,
            reserves, frees, failedReserves, refusedFrees);
    }

    /**
     * Each segment's occupancy as a bar of {@code cells} characters, in address order: {@code #} all used,
     * {@code .} all free, {@code +} part of each; the segments in order, separated by commas.
     */
    public synchronized String occupancyMap(int cells) {
        returnRecentFrees();
        StringBuilder map = new StringBuilder();
        for (int p = 0; p < positionsInUse; p++) {
            FirstFitAllocator allocator = allocators[p];
            if (allocator == null) {
                continue;
            }
            long capacity = allocator.capacityBytes();
            long[] free = new long[cells];
            allocator.forEachFreeBlock((offset, size) -> {
                for (int c = (int) (offset * cells / capacity); c < cells && cellStart(c, capacity, cells) < offset + size; c++) {
                    long from = Math.max(offset, cellStart(c, capacity, cells));
                    long to = Math.min(offset + size, cellStart(c + 1, capacity, cells));
                    free[c] += Math.max(0, to - from);
                }
            });
            if (!map.isEmpty()) {
                map.append(',');
            }
            for (int c = 0; c < cells; c++) {
                long cellBytes = cellStart(c + 1, capacity, cells) - cellStart(c, capacity, cells);
                map.append(free[c] == 0 ? '#' : free[c] >= cellBytes ? '.' : '+');
            }
        }
        return map.toString();
    }

    private static long cellStart(int cell, long capacity, int cells) {
        return capacity * cell / cells;
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
        for (int p = 0; p < positionsInUse; p++) {
            if (segments[p] != null) {
                segments[p].unlink();
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
        for (int p = 0; p < positionsInUse; p++) {
            if (segments[p] != null) {
                try {
                    removeSegment(p);
                } catch (RuntimeException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        }
        sweeper.leave();
        if (failure != null) {
            throw failure;
        }
    }

    // Returns the new segment's position, or -1 when the cap is reached or the file system is full.
    private int grow(long bytes, boolean dedicatedSegment) {
        while (segmentsBytes + bytes > ceilingBytes()) {
            if (!removeAnIdleDedicatedSegment()) {
                return -1;
            }
        }
        int p = 0;
        while (segments[p] != null) {
            p++;
        }
        MappedSegment segment;
        try {
            segment = createSegment(bytes);
        } catch (ShmFullException e) {
            if (!shmFullWarned) {
                shmFullWarned = true;
                LOG.warn("shared memory is full, the arena cannot grow: {}", e.getMessage());
            } else {
                LOG.debug("shared memory is full, the arena cannot grow: {}", e.getMessage());
            }
            return -1;
        }
        shmFullWarned = false;
        segments[p] = segment;
        allocators[p] = new FirstFitAllocator(bytes);
        dedicated[p] = dedicatedSegment;
        generations[p] = SlotHandle.nextGeneration(generations[p]);
        positionsInUse = Math.max(positionsInUse, p + 1);
        segmentCount++;
        segmentsBytes += bytes;
        assert segmentCount <= maxSegments : "each segment is at least segmentBytes: the ceiling bounds the count";
        listener.mapped(segment);
        LOG.debug("arena grew: segment={}, sizeBytes={}, dedicated={}, segments={}",
            segment.name(), bytes, dedicatedSegment, segmentCount);
        Posix.FileSystemSpace space = Posix.statvfs(dir.toString());
        long usedBytes = space.totalBytes() - space.availableBytes();
        if (usedBytes > CapacityWarnings.SHM_USE_WARN_FRACTION * space.totalBytes()) {
            warnings.held(CapacityWarnings.Kind.SHM_ABOVE_80_PERCENT, "the shared-memory directory is more than 80%"
                + " used: dir={}, usedBytes={} ({}), fileSystemBytes={} ({}): other entities' arenas may soon spill;"
                + " see mstar-shm doctor", dir, usedBytes, mib(usedBytes), space.totalBytes(), mib(space.totalBytes()));
        }
        return p;
    }

    // At the cap, an idle dedicated segment gives its room back (the largest: it frees the most).
    private boolean removeAnIdleDedicatedSegment() {
        int largest = -1;
        for (int p = 0; p < positionsInUse; p++) {
            if (isIdleDedicated(p) && (largest < 0 || allocators[p].capacityBytes() > allocators[largest].capacityBytes())) {
                largest = p;
            }
        }
        if (largest >= 0) {
            removeSegment(largest);
        }
        return largest >= 0;
    }

    /** The operator warnings and how often each condition held. */
    CapacityWarnings warnings() {
        return warnings;
    }

    private MappedSegment createSegment(long bytes) {
        for (int attempt = 1; ; attempt++) {
            String name = owner.segmentName(nextIndex++);
            try {
                return MappedSegment.create(dir, name, bytes);
            } catch (NativeCallException e) {
                // Someone else's file (or a planted link) at our name: never touch it, take the next name.
                if (e.errno() != Posix.EEXIST || attempt == NAME_ATTEMPTS) {
                    throw e;
                }
                LOG.warn("a file already exists at a segment name, skipping it: path={}", e.path());
            }
        }
    }

    private void removeSegment(int p) {
        MappedSegment segment = segments[p];
        segments[p] = null;
        allocators[p] = null;
        dedicated[p] = false;
        retired[p] = false;
        segmentCount--;
        segmentsBytes -= segment.sizeBytes();
        try {
            listener.unmapping(segment);
        } finally {
            segment.close();
        }
    }

    private int livePosition(long slot) {
        if (slot < 0) {
            return -1;
        }
        int p = SlotHandle.position(slot);
        if (p >= positionsInUse || segments[p] == null || generations[p] != SlotHandle.generation(slot)) {
            return -1;
        }
        return p;
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

    private static String mib(long bytes) {
        return (bytes >> 20) + " MiB";
    }
}
