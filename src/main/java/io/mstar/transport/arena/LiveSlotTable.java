package io.mstar.transport.arena;

import java.util.Arrays;

/**
 * Live slots of one allocator: start granule to length in granules. Open addressing with linear
 * probing and backward-shift deletion (no tombstones), so lookups stay short under churn and no
 * object is allocated except when the table doubles. Key and value sit side by side in one array,
 * so a lookup touches one cache line. Not thread-safe.
 */
final class LiveSlotTable {
    static final int MISSING = -1;
    private static final int EMPTY = -1;

    private int[] entries; // key at 2i, value at 2i + 1
    private int mask;
    private int size;

    LiveSlotTable() {
        allocate(64);
    }

    int size() {
        return size;
    }

    void put(int key, int value) {
        if ((size + 1) * 2 > mask + 1) {
            rehash((mask + 1) * 2);
        }
        int i = slot(key);
        while (entries[2 * i] != EMPTY) {
            if (entries[2 * i] == key) {
                entries[2 * i + 1] = value;
                return;
            }
            i = (i + 1) & mask;
        }
        entries[2 * i] = key;
        entries[2 * i + 1] = value;
        size++;
    }

    int get(int key) {
        int i = slot(key);
        while (entries[2 * i] != EMPTY) {
            if (entries[2 * i] == key) {
                return entries[2 * i + 1];
            }
            i = (i + 1) & mask;
        }
        return MISSING;
    }

    /** Removes key and returns its value, or {@link #MISSING}. */
    int remove(int key) {
        int i = slot(key);
        while (entries[2 * i] != EMPTY) {
            if (entries[2 * i] == key) {
                int value = entries[2 * i + 1];
                shiftBack(i);
                size--;
                return value;
            }
            i = (i + 1) & mask;
        }
        return MISSING;
    }

    // Moves later members of the probe run into the hole so that every key stays reachable from its home slot.
    private void shiftBack(int hole) {
        int i = hole;
        while (true) {
            i = (i + 1) & mask;
            int key = entries[2 * i];
            if (key == EMPTY) {
                break;
            }
            int home = slot(key);
            boolean movable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
            if (movable) {
                entries[2 * hole] = key;
                entries[2 * hole + 1] = entries[2 * i + 1];
                hole = i;
            }
        }
        entries[2 * hole] = EMPTY;
    }

    private int slot(int key) {
        int h = key * 0x9E3779B9;
        return (h ^ (h >>> 16)) & mask;
    }

    private void rehash(int capacity) {
        int[] old = entries;
        allocate(capacity);
        size = 0;
        for (int i = 0; i < old.length; i += 2) {
            if (old[i] != EMPTY) {
                put(old[i], old[i + 1]);
            }
        }
    }

    private void allocate(int capacity) {
        entries = new int[2 * capacity];
        Arrays.fill(entries, EMPTY);
        mask = capacity - 1;
    }
}
