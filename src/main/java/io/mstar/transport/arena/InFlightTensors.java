package io.mstar.transport.arena;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.liveness.SlotHolds;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.shm.SlotStamp;
import io.mstar.transport.spill.SpillStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * Where each tensor of one arena transport is until it is freed: a slot (in the {@link InFlightTable},
 * guarded here) or a spill file (in the {@link SpillStore}). Releasing one frees its slot, waking a send
 * that waits on the {@link CapacityLadder}, or removes its file. Thread-safe; tracking and releasing a
 * slot allocate nothing.
 *
 * <p>This is where the reuse rule holds for the producer: a slot goes back to the arena only when its tensor
 * is released and no hold ({@link SlotHolds}: a network write not yet done) remains; its stamp
 * ({@link SlotStamp}) is cleared just before.
 */
final class InFlightTensors implements SlotHolds {
    private static final Logger LOG = LoggerFactory.getLogger(InFlightTensors.class);

    private final SegmentedArena arena;
    private final SpillStore spill;
    private final InFlightTable slots = new InFlightTable(); // guarded by itself
    private final Map<Long, SlotHold> holds = new HashMap<>(); // by slot handle; guarded by slots
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
        long nbytes;
        synchronized (slots) {
            slot = slots.remove(msb, lsb);
            sentAt = slots.removedSentAt();
            nbytes = slots.removedNbytes();
            if (slot != InFlightTable.MISSING && deferredByHold(slot, nbytes)) {
                return sentAt;
            }
        }
        if (slot != InFlightTable.MISSING) {
            free(slot, nbytes);
            return sentAt;
        }
        return spill.release(uuid != null ? uuid : new UUID(msb, lsb));
    }

    // Called with the table's lock held: a held slot is freed by its last hold's close instead. Boxes nothing
    // while no slot is held (the ACK path allocates nothing).
    private boolean deferredByHold(long slot, long nbytes) {
        SlotHold hold = holds.isEmpty() ? null : holds.get(slot);
        if (hold == null) {
            return false;
        }
        hold.releasedNbytes = nbytes;
        return true;
    }

    private void free(long slot, long nbytes) {
        arena.free(slot, nbytes);
        ladder.freed();
    }

    @Override
    public Hold hold(long msb, long lsb) {
        synchronized (slots) {
            long slot = slots.slotOf(msb, lsb);
            if (slot == InFlightTable.MISSING) {
                return NONE;
            }
            SlotHold hold = holds.computeIfAbsent(slot, SlotHold::new);
            hold.count++;
            return hold.handle();
        }
    }

    // The last hold on a slot is closed: a slot released meanwhile is freed now.
    private void unhold(SlotHold hold) {
        synchronized (slots) {
            if (--hold.count > 0) {
                return;
            }
            holds.remove(hold.slot);
            if (hold.releasedNbytes < 0) {
                return;
            }
        }
        free(hold.slot, hold.releasedNbytes);
    }

    /** The holds on one slot, and the tensor size to free it with once it was released meanwhile (else -1). */
    private final class SlotHold {
        final long slot;
        int count;
        long releasedNbytes = -1;

        SlotHold(long slot) {
            this.slot = slot;
        }

        Hold handle() {
            AtomicBoolean open = new AtomicBoolean(true);
            return () -> {
                if (open.compareAndSet(true, false)) {
                    unhold(this);
                }
            };
        }
    }

    /** Test seam: frees a tensor's slot as a bug would, leaving the tensor in flight with its outcome undecided. */
    void freeBehindTracking(long msb, long lsb) {
        long slot;
        long nbytes;
        synchronized (slots) {
            slot = slots.slotOf(msb, lsb);
            nbytes = slots.nbytesOf(msb, lsb);
        }
        if (slot != InFlightTable.MISSING) {
            arena.free(slot, nbytes);
        }
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

    /** A tensor in a slot that waits for its ACK, as seen by the stall check. */
    record Oldest(UUID uuid, long sentAtNs, String holder) {
    }

    /** The tensor in a slot that was sent first and is not freed yet, or null. */
    Oldest oldest() {
        synchronized (slots) {
            int i = slots.oldest();
            return i < 0 ? null : new Oldest(new UUID(slots.uuidMsb(i), slots.uuidLsb(i)), slots.sentAt(i), slots.holder(i));
        }
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
            slots.removeOlderThan(cutoff, (msb, lsb, slot, nbytes, sentAt) -> expired.add(new long[] {msb, lsb,
                deferredByHold(slot, nbytes) ? InFlightTable.MISSING : slot, sentAt, nbytes}));
        }
        long oldestMs = 0;
        for (long[] e : expired) {
            forget.accept(new UUID(e[0], e[1]));
            if (e[2] != InFlightTable.MISSING) {
                arena.free(e[2], e[4]);
            }
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
