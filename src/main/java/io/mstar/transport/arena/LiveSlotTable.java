package io.mstar.transport.arena;

import java.util.Arrays;

/**
 * Live slots of one allocator: start granule to length in granules. Open addressing with linear
 * probing and backward-shift deletion (no tombstones), so lookups stay short under churn and no
 * object is allocated except when the table doubles. Not thread-safe.
 */
final class LiveSlotTable {
    static final int MISSING = -1;
    private static final int EMPTY = -1;

    private int[] keys;
    private int[] values;
    private int mask;
    private int size;

    LiveSlotTable() {
        allocate(64);
    }

    int size() {
        return size;
    }

    void put(int key, int value) {
        if ((size + 1) * 2 > keys.length) {
            rehash(keys.length * 2);
        }
        int i = slot(key);
        while (keys[i] != EMPTY) {
            if (keys[i] == key) {
                values[i] = value;
                return;
            }
            i = (i + 1) & mask;
        }
        keys[i] = key;
        values[i] = value;
        size++;
    }

    int get(int key) {
        int i = slot(key);
        while (keys[i] != EMPTY) {
            if (keys[i] == key) {
                return values[i];
            }
            i = (i + 1) & mask;
        }
        return MISSING;
    }

    /** Removes key and returns its value, or {@link #MISSING}. */
    int remove(int key) {
        int i = slot(key);
        while (keys[i] != EMPTY) {
            if (keys[i] == key) {
                int value = values[i];
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
            int key = keys[i];
            if (key == EMPTY) {
                break;
            }
            int home = slot(key);
            boolean movable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
            if (movable) {
                keys[hole] = key;
                values[hole] = values[i];
                hole = i;
            }
        }
        keys[hole] = EMPTY;
    }

    private int slot(int key) {
        int h = key * 0x9E3779B9;
        return (h ^ (h >>> 16)) & mask;
    }

    private void rehash(int capacity) {
        int[] oldKeys = keys;
        int[] oldValues = values;
        allocate(capacity);
        size = 0;
        for (int i = 0; i < oldKeys.length; i++) {
            if (oldKeys[i] != EMPTY) {
                put(oldKeys[i], oldValues[i]);
            }
        }
    }

    private void allocate(int capacity) {
        keys = new int[capacity];
        values = new int[capacity];
        Arrays.fill(keys, EMPTY);
        mask = capacity - 1;
    }
}
