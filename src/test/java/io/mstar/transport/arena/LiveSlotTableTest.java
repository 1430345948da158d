package io.mstar.transport.arena;

import org.junit.jupiter.api.Test;

import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

class LiveSlotTableTest {
    @Test
    void agreesWithHashMapUnderChurn() {
        long seed = 42;
        SplittableRandom random = new SplittableRandom(seed);
        LiveSlotTable table = new LiveSlotTable();
        Map<Integer, Integer> model = new HashMap<>();
        for (int step = 0; step < 300_000; step++) {
            // A small key space makes long probe runs and many backward shifts.
            int key = random.nextInt(step < 150_000 ? 5_000 : 200_000);
            int op = random.nextInt(3);
            if (op == 0) {
                int value = random.nextInt(1 << 20);
                table.put(key, value);
                model.put(key, value);
            } else if (op == 1) {
                Integer expected = model.remove(key);
                assertEquals(expected == null ? LiveSlotTable.MISSING : expected, table.remove(key), "remove " + key);
            } else {
                Integer expected = model.get(key);
                assertEquals(expected == null ? LiveSlotTable.MISSING : expected, table.get(key), "get " + key);
            }
            assertEquals(model.size(), table.size());
        }
        for (Map.Entry<Integer, Integer> e : model.entrySet()) {
            assertEquals(e.getValue(), table.get(e.getKey()));
        }
    }
}
