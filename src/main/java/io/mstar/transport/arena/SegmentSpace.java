package io.mstar.transport.arena;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.lifecycle.NodeBudget;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappingListener;
import io.mstar.transport.shm.ShmFullException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;

/**
 * Making and removing an arena's segments: files in the shared-memory directory, which must be able to hold the
 * arena's ceiling ({@link #checkCeiling}); up to that ceiling, an idle dedicated segment giving its room back when
 * it is reached; and, when {@value TransportConfig#NODE_MAX_MB} is set, within the deployment's
 * {@link NodeBudget}, which every arena commits a segment's bytes to before it makes the segment (joined with the
 * first segment: a worker that only receives never joins). Each segment mapped and unmapped is told to the
 * {@link MappingListener}. Called under the arena's lock.
 */
final class SegmentSpace {
    private static final Logger LOG = LoggerFactory.getLogger(SegmentedArena.class);
    private static final int NAME_ATTEMPTS = 8;

    private final Owner owner;
    private final SegmentTable table;
    private MappingListener listener = MappingListener.NONE;
    private final Path dir;
    private final long ceilingBytes;
    private final long nodeBudgetBytes; // 0: no node budget
    private final CapacityWarnings warnings;
    private NodeBudget budget;
    private int nextIndex;
    private boolean shmFullWarned;
    private boolean budgetWarned;

    SegmentSpace(Owner owner, SegmentTable table, long ceilingBytes, long nodeBudgetBytes, CapacityWarnings warnings) {
        this.owner = owner;
        this.table = table;
        this.dir = owner.dir();
        this.ceilingBytes = ceilingBytes;
        this.nodeBudgetBytes = nodeBudgetBytes;
        this.warnings = warnings;
    }

    /** At start: the file system must be able to hold the ceiling; a ceiling above its free space is warned of. */
    void checkCeiling(int maxSegments, long segmentBytes) {
        Posix.FileSystemSpace space;
        try {
            space = Posix.statvfs(dir.toString());
        } catch (NativeCallException e) {
            throw new ConfigurationException("shared-memory directory is not usable: " + TransportConfig.SHM_DIR
                + "=" + dir + ", " + e.getMessage() + ": create it or point " + TransportConfig.SHM_DIR
                + " at a tmpfs directory");
        }
        if (ceilingBytes > space.totalBytes()) {
            throw new ConfigurationException("arena ceiling exceeds the shared-memory file system: dir=" + dir
                + ", fileSystemBytes=" + space.totalBytes() + " (" + mib(space.totalBytes()) + "), ceilingBytes="
                + ceilingBytes + " (" + maxSegments + " segments x " + mib(segmentBytes) + "): give the container a"
                + " larger shared-memory size (docker --shm-size, a larger emptyDir medium: Memory) or lower "
                + TransportConfig.MAX_SEGMENTS + " or " + TransportConfig.SEGMENT_MB);
        }
        if (ceilingBytes > space.availableBytes()) {
            warnings.held(CapacityWarnings.Kind.CEILING_ABOVE_FREE_SPACE, "arena ceiling exceeds the free shared"
                    + " memory; growth will stop early and the arena will spill: dir={}, availableBytes={} ({}),"
                    + " ceilingBytes={} ({})", dir, space.availableBytes(), mib(space.availableBytes()), ceilingBytes,
                mib(ceilingBytes));
        }
    }

    /**
     * Adds a segment of {@code bytes} to the table; returns its position, or -1 when the ceiling, the node budget
     * or the file system cannot take it.
     */
    int grow(long bytes, boolean dedicatedSegment) {
        while (table.bytes() + bytes > ceilingBytes) {
            if (!removeAnIdleDedicatedSegment()) {
                return -1;
            }
        }
        MappedSegment segment = create(bytes);
        if (segment == null) {
            return -1;
        }
        int p = table.add(segment, dedicatedSegment);
        listener.mapped(segment);
        LOG.debug("arena grew: segment={}, sizeBytes={}, dedicated={}, segments={}",
            segment.name(), bytes, dedicatedSegment, table.count());
        return p;
    }

    // At the cap, an idle dedicated segment gives its room back (the largest: it frees the most).
    private boolean removeAnIdleDedicatedSegment() {
        int largest = -1;
        for (int p = 0; p < table.positions(); p++) {
            if (table.isIdleDedicated(p)
                && (largest < 0 || table.allocator(p).capacityBytes() > table.allocator(largest).capacityBytes())) {
                largest = p;
            }
        }
        if (largest >= 0) {
            remove(largest);
        }
        return largest >= 0;
    }

    /** Removes the segment at {@code p}: unmapped, unlinked, its bytes back to the node budget. */
    void remove(int p) {
        MappedSegment segment = table.remove(p);
        try {
            listener.unmapping(segment);
        } finally {
            try {
                segment.close();
            } finally {
                if (budget != null) {
                    budget.release(segment.sizeBytes());
                }
            }
        }
    }

    /** Tells {@code listener} of every segment mapped now and later, and before each is unmapped. */
    void mappingListener(MappingListener mappings) {
        this.listener = mappings;
        for (int p = 0; p < table.positions(); p++) {
            if (table.segment(p) != null) {
                mappings.mapped(table.segment(p));
            }
        }
    }

    // A new segment of `bytes`, committed to the node budget first; null when the budget or the file system refuse.
    private MappedSegment create(long bytes) {
        if (!commit(bytes)) {
            return null;
        }
        boolean ok = false;
        try {
            MappedSegment segment = createFile(bytes);
            ok = true;
            shmFullWarned = false;
            warnIfNearlyFull();
            return segment;
        } catch (ShmFullException e) {
            if (!shmFullWarned) {
                shmFullWarned = true;
                LOG.warn("shared memory is full, the arena cannot grow: {}", e.getMessage());
            } else {
                LOG.debug("shared memory is full, the arena cannot grow: {}", e.getMessage());
            }
            return null;
        } finally {
            if (!ok && budget != null) {
                budget.release(bytes);
            }
        }
    }

    /** The node budget's bytes and what every arena committed to it, or null without one (or before joining). */
    long[] nodeBudget() {
        NodeBudget b = budget;
        return b == null ? null : new long[] {b.budgetBytes(), b.committedBytes()};
    }

    /** Leaves the node budget; the last arena out removes its file. */
    void close() {
        if (budget != null) {
            budget.close();
        }
    }

    private boolean commit(long bytes) {
        if (nodeBudgetBytes == 0) {
            return true;
        }
        if (budget == null) {
            budget = NodeBudget.join(dir, owner.namespace(), nodeBudgetBytes, owner.nonce());
        }
        if (budget.tryCommit(bytes)) {
            budgetWarned = false;
            return true;
        }
        if (!budgetWarned) { // once per time at the budget, as at the ceiling
            budgetWarned = true;
            LOG.warn("the deployment's node budget is used up, the arena cannot grow (it waits for its slots, then"
                + " spills): {}={}, committedBytes={}, segmentBytes={}", TransportConfig.NODE_MAX_MB,
                budget.budgetBytes() >> 20, budget.committedBytes(), bytes);
        }
        return false;
    }

    private MappedSegment createFile(long bytes) {
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

    private void warnIfNearlyFull() {
        Posix.FileSystemSpace space = Posix.statvfs(dir.toString());
        long usedBytes = space.totalBytes() - space.availableBytes();
        if (usedBytes > CapacityWarnings.SHM_USE_WARN_FRACTION * space.totalBytes()) {
            warnings.held(CapacityWarnings.Kind.SHM_ABOVE_80_PERCENT, "the shared-memory directory is more than 80%"
                + " used: dir={}, usedBytes={} ({}), fileSystemBytes={} ({}): other entities' arenas may soon spill;"
                + " see mstar-shm doctor", dir, usedBytes, mib(usedBytes), space.totalBytes(), mib(space.totalBytes()));
        }
    }

    static String mib(long bytes) {
        return (bytes >> 20) + " MiB";
    }
}
