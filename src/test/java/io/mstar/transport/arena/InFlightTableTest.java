package io.mstar.transport.arena;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class InFlightTableTest {
    private record Key(long msb, long lsb) {
    }

    @Test
    void agreesWithHashMapUnderChurnAndExpiry() {
        long seed = 17;
        SplittableRandom random = new SplittableRandom(seed);
        InFlightTable table = new InFlightTable();
        Map<Key, long[]> model = new HashMap<>();
        List<Key> keys = new ArrayList<>();
        for (int step = 0; step < 300_000; step++) {
            int op = random.nextInt(10);
            if (op < 5 || keys.isEmpty()) {
                // Few distinct high bits make long probe runs.
                Key k = new Key(random.nextInt(64), random.nextLong());
                long slot = random.nextLong(1L << 40);
                table.put(k.msb, k.lsb, slot, step, step);
                if (model.put(k, new long[] {slot, step}) == null) {
                    keys.add(k);
                }
            } else if (op < 9) {
                Key k = keys.remove(random.nextInt(keys.size()));
                long[] expected = model.remove(k);
                assertEquals(expected[0], table.remove(k.msb, k.lsb), "step " + step);
                assertEquals(InFlightTable.MISSING, table.remove(k.msb, k.lsb), "second remove");
            } else {
                long cutoff = step - random.nextInt(5_000);
                table.removeOlderThan(cutoff, (msb, lsb, slot, nbytes, sentAt) -> {
                    long[] expected = model.remove(new Key(msb, lsb));
                    assertTrue(expected != null && expected[0] == slot && sentAt < cutoff, "expired entry");
                });
                model.entrySet().removeIf(e -> {
                    assertTrue(e.getValue()[1] >= cutoff, "an old entry survived the expiry");
                    return false;
                });
                keys.removeIf(k -> !model.containsKey(k));
            }
            assertEquals(model.size(), table.size(), "step " + step);
        }
        for (Map.Entry<Key, long[]> e : model.entrySet()) {
            assertTrue(table.contains(e.getKey().msb, e.getKey().lsb));
        }
    }

    /** Growing from 256 to 32,768 entries keeps every value with its uuid, the holder included. */
    @Test
    void growingKeepsEveryColumnWithItsUuid() {
        InFlightTable table = new InFlightTable();
        int n = 10_000;
        for (int k = 0; k < n; k++) {
            table.put(k % 7, k, 1000L + k, k, k); // few distinct high halves: long probe runs
            assertTrue(table.setHolder(k % 7, k, "consumer-" + (k % 3)));
        }
        assertEquals(n, table.size());
        int[] held = {0};
        table.visitHeldBy("consumer-1"::equals, (msb, lsb, holder) -> {
            assertEquals(1, lsb % 3, "the holder moved with its uuid");
            held[0]++;
        });
        assertEquals(n / 3, held[0]);
        for (int k = 0; k < n; k += 2) {
            assertEquals(1000L + k, table.remove(k % 7, k));
            assertEquals(k, table.removedSentAt());
        }
        for (int k = 1; k < n; k += 2) {
            assertTrue(table.contains(k % 7, k));
        }
        assertEquals(n / 2, table.size());
    }
}
