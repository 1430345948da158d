package io.mstar.transport.arena;

/**
 * Address-ordered first-fit allocator over one segment's offsets, with immediate coalescing.
 *
 * <h2>Algorithm</h2>
 * Space is handed out in granules of {@value #ALIGNMENT_BYTES} bytes, so every slot starts
 * {@value #ALIGNMENT_BYTES}-byte aligned. Free blocks are the nodes of a treap keyed by start address;
 * each node also holds the largest block size in its subtree. The live slots (start to length) sit in
 * an open-addressing table.
 * <ul>
 *   <li>{@link #reserve}: descend from the root, going left whenever the left subtree holds a block
 *       that fits: the first node that fits on this walk is the lowest-address block that fits. The
 *       slot is cut from its front; an exact fit removes the node.</li>
 *   <li>{@link #free}: look the offset up among the live slots (which refuses double and unknown
 *       frees before anything changes), find the free neighbours by address, and merge with each one
 *       that touches: at most one node is inserted or removed, so no two free blocks are ever adjacent.</li>
 *   <li>{@link #largestFreeBlockBytes}: the root's subtree maximum.</li>
 * </ul>
 *
 * <h2>Complexity</h2>
 * With n free blocks: reserve and free are O(log n) expected (treap depth), plus an O(1) expected
 * table operation; the largest free block is O(1). Nodes live in parallel {@code int} arrays reused
 * through a free list, so reserve and free allocate no object; arrays only double when the number of
 * free blocks or live slots reaches a new high.
 *
 * <h2>Thread safety</h2>
 * None: callers serialize access (the segmented arena holds its lock around every call).
 */
final class FirstFitAllocator {
    /** Alignment and granule size of every slot. */
    static final int ALIGNMENT_BYTES = 256;
    /** {@link #reserve} returns this when no free block fits. */
    static final long FULL = -1L;
    /** Largest capacity: granule indices are {@code int}s. */
    static final long MAX_CAPACITY_BYTES = (long) Integer.MAX_VALUE * ALIGNMENT_BYTES;

    private static final int SHIFT = 8;
    private static final int NIL = 0;

    private final long capacityBytes;

    // Treap nodes; index 0 is NIL, whose size and maxSize stay 0.
    private int[] start;
    private int[] size;
    private int[] maxSize;
    private int[] left;
    private int[] right;
    private int[] priority;
    private int nextUnusedNode = 1;
    private int freeNodeList = NIL;
    private int root = NIL;
    private int freeBlocks;
    private int randomState = 0x2545F491;
    private int taken;

    private final LiveSlotTable live = new LiveSlotTable();
    private long usedGranules;

    private long reserves;
    private long frees;
    private long failedReserves;
    private long refusedFrees;

    FirstFitAllocator(long capacityBytes) {
        if (capacityBytes <= 0 || capacityBytes % ALIGNMENT_BYTES != 0 || capacityBytes > MAX_CAPACITY_BYTES) {
            throw new IllegalArgumentException("allocator capacity must be a positive multiple of "
                + ALIGNMENT_BYTES + " up to " + MAX_CAPACITY_BYTES + ": capacityBytes=" + capacityBytes);
        }
        this.capacityBytes = capacityBytes;
        growNodes(16);
        root = newNode(0, (int) (capacityBytes >>> SHIFT));
    }

    /**
     * Reserves the lowest-address slot of at least {@code sizeBytes}, rounded up to the alignment.
     *
     * @return the slot's offset, or {@link #FULL} when no free block fits
     * @throws IllegalArgumentException when {@code sizeBytes} is zero or negative (counted as a failed reserve)
     */
    long reserve(long sizeBytes) {
        if (sizeBytes <= 0) {
            failedReserves++;
            throw new IllegalArgumentException("reserve size must be positive: sizeBytes=" + sizeBytes);
        }
        long granules = (sizeBytes + ALIGNMENT_BYTES - 1) >>> SHIFT;
        if (granules > maxSize[root]) {
            failedReserves++;
            return FULL;
        }
        int length = (int) granules;
        root = take(root, length);
        live.put(taken, length);
        usedGranules += length;
        reserves++;
        return (long) taken << SHIFT;
    }

    /** Frees the live slot starting at {@code offsetBytes}; refusals change nothing but a counter. */
    FreeOutcome free(long offsetBytes) {
        if (offsetBytes < 0 || offsetBytes >= capacityBytes || (offsetBytes & (ALIGNMENT_BYTES - 1)) != 0) {
            refusedFrees++;
            return FreeOutcome.UNKNOWN_OFFSET;
        }
        int granule = (int) (offsetBytes >>> SHIFT);
        int length = live.remove(granule);
        if (length == LiveSlotTable.MISSING) {
            refusedFrees++;
            return insideFreeBlock(granule) ? FreeOutcome.DOUBLE_FREE : FreeOutcome.UNKNOWN_OFFSET;
        }
        release(granule, length);
        usedGranules -= length;
        frees++;
        return FreeOutcome.FREED;
    }

    /** The size in bytes of the live slot at {@code offsetBytes}, or -1 when none starts there. */
    long slotBytes(long offsetBytes) {
        if (offsetBytes < 0 || offsetBytes >= capacityBytes || (offsetBytes & (ALIGNMENT_BYTES - 1)) != 0) {
            return -1;
        }
        int length = live.get((int) (offsetBytes >>> SHIFT));
        return length == LiveSlotTable.MISSING ? -1 : (long) length << SHIFT;
    }

    long capacityBytes() {
        return capacityBytes;
    }

    long usedBytes() {
        return usedGranules << SHIFT;
    }

    long freeBytes() {
        return capacityBytes - usedBytes();
    }

    long largestFreeBlockBytes() {
        return (long) maxSize[root] << SHIFT;
    }

    int liveSlots() {
        return live.size();
    }

    int freeBlocks() {
        return freeBlocks;
    }

    long reserves() {
        return reserves;
    }

    long frees() {
        return frees;
    }

    long failedReserves() {
        return failedReserves;
    }

    long refusedFrees() {
        return refusedFrees;
    }

    /** Calls {@code visitor} with each free block's offset and size in address order (for tests and diagnostics). */
    void forEachFreeBlock(BlockVisitor visitor) {
        visit(root, visitor);
    }

    /** Receives one free block. */
    @FunctionalInterface
    interface BlockVisitor {
        void block(long offsetBytes, long sizeBytes);
    }

    private void visit(int t, BlockVisitor visitor) {
        if (t == NIL) {
            return;
        }
        visit(left[t], visitor);
        visitor.block((long) start[t] << SHIFT, (long) size[t] << SHIFT);
        visit(right[t], visitor);
    }

    // Cuts `length` granules from the front of the lowest-address block that fits; sets `taken`.
    private int take(int t, int length) {
        int l = left[t];
        if (maxSize[l] >= length) {
            left[t] = take(l, length);
        } else if (size[t] >= length) {
            taken = start[t];
            if (size[t] == length) {
                int merged = merge(l, right[t]);
                releaseNode(t);
                return merged;
            }
            start[t] += length;
            size[t] -= length;
        } else {
            right[t] = take(right[t], length);
        }
        pull(t);
        return t;
    }

    private void release(int granule, int length) {
        int pred = NIL;
        int succ = NIL;
        for (int t = root; t != NIL; ) {
            if (start[t] < granule) {
                pred = t;
                t = right[t];
            } else {
                succ = t;
                t = left[t];
            }
        }
        boolean joinPred = pred != NIL && start[pred] + size[pred] == granule;
        boolean joinSucc = succ != NIL && start[succ] == granule + length;
        if (joinPred && joinSucc) {
            int merged = size[pred] + length + size[succ];
            root = remove(root, start[succ]);
            releaseNode(succ);
            root = resize(root, start[pred], start[pred], merged);
        } else if (joinPred) {
            root = resize(root, start[pred], start[pred], size[pred] + length);
        } else if (joinSucc) {
            root = resize(root, start[succ], granule, size[succ] + length);
        } else {
            root = insert(root, newNode(granule, length));
        }
    }

    private boolean insideFreeBlock(int granule) {
        for (int t = root; t != NIL; ) {
            if (granule < start[t]) {
                t = left[t];
            } else if (granule >= start[t] + size[t]) {
                t = right[t];
            } else {
                return true;
            }
        }
        return false;
    }

    // Sets the node keyed `key` to (newStart, newSize); newStart must keep the address order.
    private int resize(int t, int key, int newStart, int newSize) {
        if (key < start[t]) {
            left[t] = resize(left[t], key, newStart, newSize);
        } else if (key > start[t]) {
            right[t] = resize(right[t], key, newStart, newSize);
        } else {
            start[t] = newStart;
            size[t] = newSize;
        }
        pull(t);
        return t;
    }

    private int insert(int t, int node) {
        if (t == NIL) {
            return node;
        }
        if (start[node] < start[t]) {
            left[t] = insert(left[t], node);
            if (priority[left[t]] > priority[t]) {
                t = rotateRight(t);
            }
        } else {
            right[t] = insert(right[t], node);
            if (priority[right[t]] > priority[t]) {
                t = rotateLeft(t);
            }
        }
        pull(t);
        return t;
    }

    private int remove(int t, int key) {
        if (key == start[t]) {
            return merge(left[t], right[t]);
        }
        if (key < start[t]) {
            left[t] = remove(left[t], key);
        } else {
            right[t] = remove(right[t], key);
        }
        pull(t);
        return t;
    }

    private int merge(int a, int b) {
        if (a == NIL) {
            return b;
        }
        if (b == NIL) {
            return a;
        }
        if (priority[a] > priority[b]) {
            right[a] = merge(right[a], b);
            pull(a);
            return a;
        }
        left[b] = merge(a, left[b]);
        pull(b);
        return b;
    }

    private int rotateRight(int t) {
        int l = left[t];
        left[t] = right[l];
        right[l] = t;
        pull(t);
        return l;
    }

    private int rotateLeft(int t) {
        int r = right[t];
        right[t] = left[r];
        left[r] = t;
        pull(t);
        return r;
    }

    private void pull(int t) {
        maxSize[t] = Math.max(size[t], Math.max(maxSize[left[t]], maxSize[right[t]]));
    }

    private int newNode(int blockStart, int blockSize) {
        int node;
        if (freeNodeList != NIL) {
            node = freeNodeList;
            freeNodeList = left[node];
        } else {
            if (nextUnusedNode == start.length) {
                growNodes(start.length * 2);
            }
            node = nextUnusedNode++;
        }
        start[node] = blockStart;
        size[node] = blockSize;
        maxSize[node] = blockSize;
        left[node] = NIL;
        right[node] = NIL;
        priority[node] = nextPriority();
        freeBlocks++;
        return node;
    }

    private void releaseNode(int node) {
        left[node] = freeNodeList;
        freeNodeList = node;
        freeBlocks--;
    }

    private int nextPriority() {
        int x = randomState;
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        randomState = x;
        return x;
    }

    private void growNodes(int capacity) {
        start = grow(start, capacity);
        size = grow(size, capacity);
        maxSize = grow(maxSize, capacity);
        left = grow(left, capacity);
        right = grow(right, capacity);
        priority = grow(priority, capacity);
    }

    private static int[] grow(int[] array, int capacity) {
        return array == null ? new int[capacity] : java.util.Arrays.copyOf(array, capacity);
    }
}
