package io.mstar.transport.arena;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.spill.SpillStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.function.Consumer;

/**
 * Where each tensor of one arena transport is until it is freed: a slot (in the {@link InFlightTable},
 * guarded here) or a spill file (in the {@link SpillStore}). Releasing one frees its slot, waking a send
 * that waits on the {@link CapacityLadder}, or removes its file. Thread-safe; tracking and releasing a
 * slot allocate nothing.
 */
final class InFlightTensors {
    private static final Logger LOG = LoggerFactory.getLogger(InFlightTensors.class);

    private final SegmentedArena arena;
    private final SpillStore spill;
    private final InFlightTable slots = new InFlightTable(); // guarded by itself
    private CapacityLadder ladder; // set once, before the first send

    InFlightTensors(SegmentedArena arena, SpillStore spill) {
        this.arena = arena;
        this.spill = spill;
    }

    /** The ladder to wake when a slot is freed; it needs this table's count, so it is wired after. */
    void wakes(CapacityLadder capacityLadder) {
        this.ladder = capacityLadder;
    }

    void track(long msb, long lsb, long slot, long nbytes) {
        assert slot != SegmentedArena.FULL : "a FULL outcome is spilled, never tracked";
        synchronized (slots) {
            slots.put(msb, lsb, slot, nbytes, System.nanoTime());
        }
    }

    /**
     * Frees the tensor's slot or spill file; returns when it was sent ({@link System#nanoTime}), or
     * {@link TransportCounters#NOT_IN_FLIGHT} when it is not in flight (never sent here, or freed already).
     * {@code uuid} is the same uuid as an object, or null: it is made only for a spill file.
     */
    long release(long msb, long lsb, UUID uuid) {
        long slot;
        long sentAt;
        synchronized (slots) {
            slot = slots.remove(msb, lsb);
            sentAt = slots.removedSentAt();
        }
        if (slot != InFlightTable.MISSING) {
            arena.free(slot);
            ladder.freed();
            return sentAt;
        }
        return spill.release(uuid != null ? uuid : new UUID(msb, lsb));
    }

    boolean release(UUID uuid) {
        return release(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), uuid)
            != TransportCounters.NOT_IN_FLIGHT;
    }

    /** Records the consumer a tensor in a slot went to; false when it is not in a slot (a spill file, or gone). */
    boolean sentTo(long msb, long lsb, String consumer) {
        synchronized (slots) {
            return slots.setHolder(msb, lsb, consumer);
        }
    }

    /** The consumers that hold tensors in slots. */
    Set<String> holders() {
        Set<String> holders = new HashSet<>();
        synchronized (slots) {
            slots.visitHeldBy(holder -> true, (msb, lsb, holder) -> holders.add(holder));
        }
        return holders;
    }

    /** The slot tensors held by the {@code dead} consumers, as (msb, lsb, holder); not freed yet. */
    List<Object[]> heldBy(Set<String> dead) {
        List<Object[]> found = new ArrayList<>();
        synchronized (slots) {
            slots.visitHeldBy(dead::contains, (msb, lsb, holder) -> found.add(new Object[] {msb, lsb, holder}));
        }
        return found;
    }

    boolean contains(UUID uuid) {
        boolean inArena;
        synchronized (slots) {
            inArena = slots.contains(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits());
        }
        return inArena || spill.isInFlight(uuid);
    }

    /** Tensors in flight: slots and spill files. */
    int count() {
        synchronized (slots) {
            return slots.size() + spill.inFlight();
        }
    }

    /**
     * Frees the slots and spill files that waited longer than {@code ttl} for their ACK, with one warning,
     * and tells {@code forget} each uuid; returns how many.
     */
    int releaseOlderThan(Duration ttl, Consumer<UUID> forget) {
        long now = System.nanoTime();
        long cutoff = now - ttl.toNanos();
        List<long[]> expired = new ArrayList<>();
        synchronized (slots) {
            slots.removeOlderThan(cutoff, (msb, lsb, slot, nbytes, sentAt) -> expired.add(new long[] {msb, lsb, slot, sentAt}));
        }
        long oldestMs = 0;
        for (long[] e : expired) {
            forget.accept(new UUID(e[0], e[1]));
            arena.free(e[2]);
            oldestMs = Math.max(oldestMs, (now - e[3]) / 1_000_000);
        }
        List<UUID> expiredSpills = spill.releaseOlderThan(cutoff);
        expiredSpills.forEach(forget);
        if (!expired.isEmpty()) {
            ladder.freed();
        }
        if (!expired.isEmpty() || !expiredSpills.isEmpty()) {
            LOG.warn("reclaimed tensors that got no ACK within {}={}: slots={}, spillFiles={}, oldestSlotAgeMs={}",
                TransportConfig.SLOT_TTL_S, ttl.toMillis() / 1000.0, expired.size(), expiredSpills.size(), oldestMs);
        }
        return expired.size() + expiredSpills.size();
    }
}
