package io.mstar.transport.lifecycle;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Tensor uuids are unique, version 4, and not derivable from the ones seen before. */
class TensorUuidsTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void aMillionFromFourThreadsAreDistinctVersion4Uuids() throws Exception {
        Set<UUID> seen = ConcurrentHashMap.newKeySet();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            threads.add(Thread.ofPlatform().start(() -> {
                for (int i = 0; i < 250_000; i++) {
                    UUID uuid = Owner.newUuid();
                    assertEquals(4, uuid.version());
                    assertEquals(2, uuid.variant());
                    seen.add(uuid);
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        assertEquals(1_000_000, seen.size());
    }

    @Test
    void theUuidsOfSentTensorsCannotBePredictedFromTheOnesBefore() {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString())::get);
        List<UUID> sent = new ArrayList<>();
        try (ArenaTransport transport = new ArenaTransport(config,
            new SegmentedArena(shm.path(), Namespace.of(null, "uuids"), "p", 1 << 20, 1), false)) {
            Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[16]), 16);
            for (int i = 0; i < 1000; i++) {
                TensorDescriptor d = transport.send("r", List.of(tensor)).getFirst();
                sent.add(d.uuid());
                transport.ack(List.of(d.uuid()));
            }
        }
        assertEquals(0, predictedByInvertingThreadLocalRandom(sent), "uuids follow from earlier ones");
        assertEquals(1000, new HashSet<>(sent).size());
    }

    @Test
    void thePredictorCatchesThreadLocalRandom() {
        // The attack of the test above, shown to work on uuids drawn as they were before (two nextLong calls).
        List<UUID> weak = new ArrayList<>();
        for (int i = 0; i < 1000; i++) {
            weak.add(new UUID(ThreadLocalRandom.current().nextLong(), ThreadLocalRandom.current().nextLong()));
        }
        assertTrue(predictedByInvertingThreadLocalRandom(weak) > 990, "the predictor works on ThreadLocalRandom");
    }

    // ThreadLocalRandom's next value is mix64(seed += gamma), gamma fixed per thread, and mix64 inverts: one uuid's
    // two halves give the seed and gamma, hence every later value. Counts the uuids that follow from the one before.
    private static int predictedByInvertingThreadLocalRandom(List<UUID> uuids) {
        int predicted = 0;
        for (int i = 0; i + 1 < uuids.size(); i++) {
            long seed = unmix64(uuids.get(i).getMostSignificantBits());
            long next = unmix64(uuids.get(i).getLeastSignificantBits());
            long gamma = next - seed;
            if (mix64(next + gamma) == uuids.get(i + 1).getMostSignificantBits()
                && mix64(next + 2 * gamma) == uuids.get(i + 1).getLeastSignificantBits()) {
                predicted++;
            }
        }
        return predicted;
    }

    private static long mix64(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }

    private static long unmix64(long z) {
        z = z ^ (z >>> 33);
        z *= 0x9cb4b2f8129337dbL; // inverse of 0xc4ceb9fe1a85ec53 mod 2^64
        z = z ^ (z >>> 33);
        z *= 0x4f74430c22a54005L; // inverse of 0xff51afd7ed558ccd mod 2^64
        return z ^ (z >>> 33);
    }
}
