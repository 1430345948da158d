package io.mstar.transport.arena;

import java.util.Arrays;

/**
 * Address-ordered first-fit allocator over one segment's offsets, with immediate coalescing.
 *
 * <h2>Algorithm</h2>
 * Space is handed out in granules of {@value #ALIGNMENT_BYTES} bytes, so every slot starts
 * {@value #ALIGNMENT_BYTES}-byte aligned. The free blocks are the entries of a B+ tree keyed by address:
 * a leaf holds up to {@value #FANOUT} of them in address order (start and size) and is linked to its
 * neighbours; an inner node holds, per child, the smallest start below it (the separator that routes an
 * address) and the largest free size below it. Live slots are not in the tree: a primitive hash map
 * ({@link LiveSlots}) from a slot's start to its size says what a free gives back.
 * <ul>
 *   <li>{@link #reserve}: from the root, take the first child whose largest free block fits, down to
 *       the leaf, then its first block that fits: that is the lowest-address block that fits. The slot
 *       is cut from the block's front, so the entry just moves its start up (an exact fit removes it).</li>
 *   <li>{@link #free}: only an offset the live map holds is freed; anything else (inside a free block:
 *       a double free; inside a slot or misaligned: an unknown offset) is refused before anything
 *       changes. The free blocks just before and after the offset are the neighbours it merges with, so
 *       no two free blocks are ever adjacent. They are found in the leaf the slot was cut from, which
 *       the live map remembers, as long as a check of its first and last keys (and its neighbours')
 *       shows they still are; otherwise the offset routes down from the root.</li>
 *   <li>{@link #largestFreeBlockBytes}: a field kept current by every update.</li>
 * </ul>
 * After a change, the maxima above it are raised in O(1) per level, or rescanned only when the entry
 * that shrank was the maximum, and only while they change.
 *
 * <h2>Complexity</h2>
 * With n free blocks: reserve and free are O(log n), the tree's height, with at most {@value #FANOUT}
 * entries scanned per level (three levels hold tens of thousands of free blocks), plus an expected O(1)
 * map operation; a free whose leaf is still the one its slot was cut from skips the descent. The
 * largest free block is O(1). Leaves split when full and are dropped when empty, so the height never
 * exceeds that of the largest number of free blocks seen. Nodes live in flat {@code int} arrays reused
 * through a free list and the live map is open-addressed over a {@code long} array, so reserve and free
 * allocate no object; the arrays only grow when the number of blocks or slots reaches a new high.
 *
 * <h2>Thread safety</h2>
 * None: callers serialize access (the segmented arena holds its lock around every call).
 *
 * <p>One class on purpose, though long: the tree lives in flat arrays that every operation (descent,
 * split, merge, the maxima's upkeep) reads and writes directly; behind accessors of another class they
 * would cost the hot path, and the invariants (stated as asserts) would span two files.
 */
final class FirstFitAllocator {
    /** Alignment and granule size of every slot. */
    static final int ALIGNMENT_BYTES = 256;
    /** {@link #reserve} returns this when no free block fits. */
    static final long FULL = -1L;
    /** Largest capacity: granule indices are {@code int}s. */
    static final long MAX_CAPACITY_BYTES = (long) Integer.MAX_VALUE * ALIGNMENT_BYTES;

    static final int FANOUT = 32;
    private static final int HALF = FANOUT / 2;
    private static final int SHIFT = 8;
    private static final int NIL = -1;

    private final long capacityBytes;

    // Node n owns entries [n * FANOUT, n * FANOUT + count[n]) of keys, values and children.
    // Leaves (height 0): key = free block start, value = its size.
    // Inner nodes: key = smallest start below, value = largest free size below, children = child node.
    private int[] keys;
    private int[] values;
    private int[] children;
    private int[] count;
    private int[] height;
    private int[] parent;
    private int[] slot;   // index of the node among its parent's children
    private int[] next;   // leaves: right neighbour; free nodes: next free node
    private int[] prev;   // leaves: left neighbour
    private int nodesUsed;
    private int freeNodeList = NIL;
    private int root;
    private int largest;  // granules
    private int freeBlocks;
    private long usedGranules;
    private final LiveSlots live = new LiveSlots();

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
        growNodes(8);
        root = newNode(0);
        insertAt(root, 0, 0, (int) (capacityBytes >>> SHIFT), NIL);
        freeBlocks = 1;
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
        if (granules > largest) {
            failedReserves++;
            return FULL;
        }
        int length = (int) granules;
        int node = root;
        while (height[node] > 0) {
            node = children[firstFit(node, length)];
        }
        int i = firstFit(node, length);
        int start = keys[i];
        int size = values[i];
        assert size >= length : "the maxima route to a leaf holding a block that fits";
        if (size == length) {
            removeAt(node, i - node * FANOUT);
            freeBlocks--;
        } else {
            keys[i] = start + length;
            values[i] = size - length;
            if (i == node * FANOUT) {
                syncFirstKey(node);
            }
            lowered(node, size);
        }
        live.put(start, length, node);
        usedGranules += length;
        assert usedGranules <= capacityBytes >>> SHIFT : "more granules in use than the segment has";
        reserves++;
        return (long) start << SHIFT;
    }

    /** Frees the live slot starting at {@code offsetBytes}; refusals change nothing but a counter. */
    FreeOutcome free(long offsetBytes) {
        if (offsetBytes < 0 || offsetBytes >= capacityBytes || (offsetBytes & (ALIGNMENT_BYTES - 1)) != 0) {
            refusedFrees++;
            return FreeOutcome.UNKNOWN_OFFSET;
        }
        int granule = (int) (offsetBytes >>> SHIFT);
        int at = live.find(granule);
        if (at < 0) {
            refusedFrees++;
            return insideFreeBlock(granule) ? FreeOutcome.DOUBLE_FREE : FreeOutcome.UNKNOWN_OFFSET;
        }
        int length = live.length(at);
        int leafHint = live.hint(at);
        live.removeAt(at);
        release(granule, length, leafHint);
        usedGranules -= length;
        assert usedGranules >= 0 : "freed more granules than were in use";
        frees++;
        return FreeOutcome.FREED;
    }

    /** The size in bytes of the live slot at {@code offsetBytes}, or -1 when none starts there. */
    long slotBytes(long offsetBytes) {
        if (offsetBytes < 0 || offsetBytes >= capacityBytes || (offsetBytes & (ALIGNMENT_BYTES - 1)) != 0) {
            return -1;
        }
        int length = live.get((int) (offsetBytes >>> SHIFT));
        return length == LiveSlots.NONE ? -1 : (long) length << SHIFT;
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
        return (long) largest << SHIFT;
    }

    int liveSlots() {
        return live.size();
    }

    int freeBlocks() {
        return freeBlocks;
    }

    /** Levels of the tree above the leaves (0: one leaf). */
    int treeHeight() {
        return height[root];
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
        int node = root;
        while (height[node] > 0) {
            node = children[node * FANOUT];
        }
        for (; node != NIL; node = next[node]) {
            for (int i = node * FANOUT, end = i + count[node]; i < end; i++) {
                visitor.block((long) keys[i] << SHIFT, (long) values[i] << SHIFT);
            }
        }
    }

    /** Receives one free block. */
    @FunctionalInterface
    interface BlockVisitor {
        void block(long offsetBytes, long sizeBytes);
    }

    // Entry index of the first entry of `node` whose value (block or subtree maximum) is at least `length`.
    private int firstFit(int node, int length) {
        int i = node * FANOUT;
        while (values[i] < length) {
            i++;
        }
        return i;
    }

    // Entry index of the last free block of `leaf` starting at or before `granule`; one before the leaf when none.
    private int lastStartingAtOrBefore(int leaf, int granule) {
        int base = leaf * FANOUT;
        int i = base + count[leaf] - 1;
        while (i >= base && keys[i] > granule) {
            i--;
        }
        return i;
    }

    private boolean insideFreeBlock(int granule) {
        int leaf = leafFor(granule);
        int i = lastStartingAtOrBefore(leaf, granule);
        return i >= leaf * FANOUT && granule < keys[i] + values[i];
    }

    // Frees the slot [granule, granule + length) and merges it with the free neighbours it touches.
    private void release(int granule, int length, int leafHint) {
        int leaf = neighboursLeaf(leafHint, granule) ? leafHint : leafFor(granule);
        int base = leaf * FANOUT;
        int i = lastStartingAtOrBefore(leaf, granule);
        int predLeaf = i >= base ? leaf : prev[leaf];
        int pred = i >= base ? i : predLeaf == NIL ? NIL : predLeaf * FANOUT + count[predLeaf] - 1;
        int succLeaf = i + 1 < base + count[leaf] ? leaf : next[leaf];
        int succ = succLeaf == leaf ? i + 1 : succLeaf == NIL ? NIL : succLeaf * FANOUT;
        assert pred == NIL || keys[pred] + values[pred] <= granule : "a live slot overlaps the free block before it";
        assert succ == NIL || keys[succ] >= granule + length : "a live slot overlaps the free block after it";
        boolean joinPred = pred != NIL && keys[pred] + values[pred] == granule;
        boolean joinSucc = succ != NIL && keys[succ] == granule + length;
        // Raise before removing: the removal's rescan then sees the merged block, so every maximum stays exact.
        if (joinPred) {
            values[pred] += length + (joinSucc ? values[succ] : 0);
            raised(predLeaf, values[pred]);
            if (joinSucc) {
                removeAt(succLeaf, succ - succLeaf * FANOUT);
                freeBlocks--;
            }
        } else if (joinSucc) {
            keys[succ] = granule;
            values[succ] += length;
            if (succ == succLeaf * FANOUT) {
                syncFirstKey(succLeaf);
            }
            raised(succLeaf, values[succ]);
        } else {
            insertAt(leaf, i + 1 - base, granule, length, NIL);
            freeBlocks++;
        }
    }

    // Whether the free blocks just before and after `granule` (not a free block's start) are in `leaf` or
    // are its last and next leaf's first: then it serves as leafFor(granule). The leaf a slot was cut
    // from passes until splits and merges move its blocks; it may have been dropped or reused since.
    private boolean neighboursLeaf(int leaf, int granule) {
        if (height[leaf] != 0 || count[leaf] == 0) {
            return false;
        }
        int first = leaf * FANOUT;
        int last = first + count[leaf] - 1;
        int before = prev[leaf];
        int after = next[leaf];
        return (keys[first] < granule || before == NIL || keys[before * FANOUT + count[before] - 1] < granule)
            && (keys[last] > granule || after == NIL || keys[after * FANOUT] > granule);
    }

    // The leaf whose address range holds `granule`: at each level, the last child whose separator is <= granule.
    private int leafFor(int granule) {
        int node = root;
        while (height[node] > 0) {
            int base = node * FANOUT;
            int i = base + count[node] - 1;
            while (i > base && keys[i] > granule) {
                i--;
            }
            node = children[i];
        }
        return node;
    }

    // Inserts an entry at position `pos` of `node`, splitting the node first when it is full.
    private void insertAt(int node, int pos, int key, int value, int child) {
        if (count[node] == FANOUT) {
            int right = split(node);
            if (pos > HALF) {
                node = right;
                pos -= HALF;
            }
        }
        int base = node * FANOUT;
        int c = count[node];
        System.arraycopy(keys, base + pos, keys, base + pos + 1, c - pos);
        System.arraycopy(values, base + pos, values, base + pos + 1, c - pos);
        keys[base + pos] = key;
        values[base + pos] = value;
        if (height[node] > 0) {
            System.arraycopy(children, base + pos, children, base + pos + 1, c - pos);
            children[base + pos] = child;
            parent[child] = node;
            renumberChildren(node, pos, c + 1);
        }
        count[node] = c + 1;
        if (pos == 0) {
            syncFirstKey(node);
        }
        raised(node, value);
    }

    // Removes the entry at position `pos` of `node`; drops the node when it becomes empty.
    private void removeAt(int node, int pos) {
        int base = node * FANOUT;
        int removed = values[base + pos];
        int c = count[node] - 1;
        System.arraycopy(keys, base + pos + 1, keys, base + pos, c - pos);
        System.arraycopy(values, base + pos + 1, values, base + pos, c - pos);
        values[base + c] = 0;
        boolean inner = height[node] > 0;
        if (inner) {
            System.arraycopy(children, base + pos + 1, children, base + pos, c - pos);
            renumberChildren(node, pos, c);
        }
        count[node] = c;
        if (pos == 0 && c > 0) {
            syncFirstKey(node);
        }
        if (c == 0 && node != root) {
            if (!inner) {
                unlinkLeaf(node);
            }
            int p = parent[node];
            int s = slot[node];
            releaseNode(node);
            removeAt(p, s);
            return;
        }
        if (node == root && height[root] > 0 && count[root] == 1) {
            // A root with one child is a level too many.
            while (height[root] > 0 && count[root] == 1) {
                int old = root;
                root = children[old * FANOUT];
                parent[root] = NIL;
                releaseNode(old);
            }
            largest = nodeMax(root);
            return;
        }
        lowered(node, removed);
    }

    // Moves the upper half of a full node into a new right sibling and links that into the parent.
    private int split(int node) {
        int right = newNode(height[node]);
        int from = node * FANOUT + HALF;
        int to = right * FANOUT;
        int moved = FANOUT - HALF;
        System.arraycopy(keys, from, keys, to, moved);
        System.arraycopy(values, from, values, to, moved);
        Arrays.fill(values, from, from + moved, 0);
        count[node] = HALF;
        count[right] = moved;
        if (height[node] > 0) {
            System.arraycopy(children, from, children, to, moved);
            for (int i = 0; i < moved; i++) {
                parent[children[to + i]] = right;
            }
            renumberChildren(right, 0, moved);
        } else {
            next[right] = next[node];
            prev[right] = node;
            if (next[node] != NIL) {
                prev[next[node]] = right;
            }
            next[node] = right;
        }
        if (node == root) {
            root = newNode(height[node] + 1);
            int base = root * FANOUT;
            keys[base] = keys[node * FANOUT];
            values[base] = nodeMax(node);
            children[base] = node;
            count[root] = 1;
            parent[node] = root;
            slot[node] = 0;
        }
        int p = parent[node];
        values[p * FANOUT + slot[node]] = nodeMax(node);
        insertAt(p, slot[node] + 1, keys[to], nodeMax(right), right);
        return right;
    }

    // The first key of `node` changed: the separators above it hold the smallest start below them.
    private void syncFirstKey(int node) {
        int key = keys[node * FANOUT];
        while (node != root) {
            int entry = parent[node] * FANOUT + slot[node];
            if (keys[entry] == key) {
                return;
            }
            keys[entry] = key;
            if (slot[node] != 0) {
                return;
            }
            node = parent[node];
        }
    }

    // An entry of `node` grew to `value` (or arrived with it): raise the maxima above while they are smaller.
    private void raised(int node, int value) {
        while (node != root) {
            int entry = parent[node] * FANOUT + slot[node];
            if (values[entry] >= value) {
                return;
            }
            values[entry] = value;
            node = parent[node];
        }
        largest = Math.max(largest, value);
    }

    // An entry of `node` shrank from `old` (or left): only when it was the maximum is the node rescanned,
    // and the ancestors only while their maximum changes.
    private void lowered(int node, int old) {
        while (true) {
            int entry = node == root ? NIL : parent[node] * FANOUT + slot[node];
            int recorded = entry == NIL ? largest : values[entry];
            if (old < recorded) {
                return;
            }
            int max = nodeMax(node);
            if (max == recorded) {
                return;
            }
            if (entry == NIL) {
                largest = max;
                return;
            }
            values[entry] = max;
            old = recorded;
            node = parent[node];
        }
    }

    // Entries past a node's count hold 0, so the loop can run over the whole node: with a fixed trip
    // count, its exit is never a mispredicted branch, which measured faster than looping to the count.
    private int nodeMax(int node) {
        int max = 0;
        for (int i = node * FANOUT, end = i + FANOUT; i < end; i++) {
            max = Math.max(max, values[i]);
        }
        return max;
    }

    private void renumberChildren(int node, int from, int to) {
        int base = node * FANOUT;
        for (int i = from; i < to; i++) {
            slot[children[base + i]] = i;
        }
    }

    private void unlinkLeaf(int leaf) {
        if (prev[leaf] != NIL) {
            next[prev[leaf]] = next[leaf];
        }
        if (next[leaf] != NIL) {
            prev[next[leaf]] = prev[leaf];
        }
    }

    private int newNode(int nodeHeight) {
        int node;
        if (freeNodeList != NIL) {
            node = freeNodeList;
            freeNodeList = next[node];
        } else {
            if (nodesUsed == count.length) {
                growNodes(count.length * 2);
            }
            node = nodesUsed++;
        }
        count[node] = 0;
        Arrays.fill(values, node * FANOUT, (node + 1) * FANOUT, 0);
        height[node] = nodeHeight;
        parent[node] = NIL;
        slot[node] = 0;
        next[node] = NIL;
        prev[node] = NIL;
        return node;
    }

    private void releaseNode(int node) {
        next[node] = freeNodeList;
        freeNodeList = node;
    }

    private void growNodes(int nodes) {
        keys = grow(keys, nodes * FANOUT);
        values = grow(values, nodes * FANOUT);
        children = grow(children, nodes * FANOUT);
        count = grow(count, nodes);
        height = grow(height, nodes);
        parent = grow(parent, nodes);
        slot = grow(slot, nodes);
        next = grow(next, nodes);
        prev = grow(prev, nodes);
    }

    private static int[] grow(int[] array, int length) {
        return array == null ? new int[length] : Arrays.copyOf(array, length);
    }
}
