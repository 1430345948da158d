package io.mstar.transport.arena;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Seeded random puts and removes against a {@link HashMap}, with keys dense enough to form long probe
 * runs; the seed is in every failure message.
 */
class LiveSlotsTest {
    @Test
    void matchesAHashMapThroughGrowthAndDeletions() {
        long seed = System.nanoTime();
        SplittableRandom random = new SplittableRandom(seed);
        LiveSlots slots = new LiveSlots();
        Map<Integer, Integer> model = new HashMap<>();
        List<Integer> keys = new ArrayList<>();
        for (int step = 0; step < 200_000; step++) {
            String where = "seed=" + seed + ", step " + step;
            int start = random.nextInt(step < 100_000 ? 1 << 16 : 1 << 12) * 16; // dense, then denser
            if (random.nextInt(3) != 0 && !model.containsKey(start)) {
                int length = 1 + random.nextInt(1 << 20);
                slots.put(start, length, length ^ start);
                model.put(start, length);
                keys.add(start);
            } else if (!keys.isEmpty()) {
                int k = keys.remove(random.nextInt(keys.size()));
                int at = slots.find(k);
                assertEquals(k ^ model.get(k), slots.hint(at), where + ": the hint moves with its slot");
                assertEquals((int) model.remove(k), slots.length(at), where);
                slots.removeAt(at);
                assertEquals(-1, slots.find(k), where + ": removed");
            }
            int probe = random.nextInt(1 << 20);
            assertEquals(model.getOrDefault(probe, LiveSlots.NONE), slots.get(probe), where + ": get " + probe);
            assertEquals(model.size(), slots.size(), where);
        }
        for (Map.Entry<Integer, Integer> e : model.entrySet()) {
            assertEquals((int) e.getValue(), slots.get(e.getKey()), "seed=" + seed);
        }
        assertEquals(LiveSlots.NONE, slots.get(Integer.MAX_VALUE - 1), "the largest start");
        LiveSlots fresh = new LiveSlots();
        fresh.put(0, 7, 0);
        assertEquals(7, fresh.get(0), "start 0 is a valid key");
    }
}
