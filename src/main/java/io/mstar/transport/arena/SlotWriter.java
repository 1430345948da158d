package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Placement;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.TensorUuids;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.shm.SlotStamp;
import io.mstar.transport.spill.SpillStore;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * A tensor's way into one arena transport: a slot up the {@link CapacityLadder}, tracked in flight
 * ({@link InFlightTensors}) before its bytes are written and its descriptor leaves; or, where the ladder
 * says spill, a file of its own ({@link SpillStore}). The host sends copy here; the device path
 * ({@link DevicePath}) reserves and describes through the same methods. Thread-safe.
 */
final class SlotWriter {
    private final SegmentedArena arena;
    private final CapacityLadder ladder;
    private final InFlightTensors inFlight;
    private final SpillStore spill;
    private final TransportCounters counters;
    /** Each thread's last claim, rearmed by its next claim once published or aborted: claims allocate nothing. */
    private final ThreadLocal<SlotClaim> lastClaim = new ThreadLocal<>();

    SlotWriter(SegmentedArena arena, CapacityLadder ladder, InFlightTensors inFlight, SpillStore spill,
               TransportCounters counters) {
        this.arena = arena;
        this.ladder = ladder;
        this.inFlight = inFlight;
        this.spill = spill;
        this.counters = counters;
    }

    /** Sends a batch: all of it, or (on an exception) nothing of it stays reserved, so it can be sent again. */
    List<TensorDescriptor> send(String requestId, List<Tensor> tensors) {
        if (tensors.size() == 1) { // the common request, without the batch's bookkeeping
            UUID uuid = Owner.newUuid();
            try {
                return List.of(send(requestId, tensors.getFirst(), uuid));
            } catch (RuntimeException e) {
                inFlight.release(uuid);
                throw e;
            }
        }
        List<TensorDescriptor> sent = new ArrayList<>(tensors.size());
        List<UUID> reserved = new ArrayList<>(tensors.size());
        boolean ok = false;
        try {
            for (Tensor tensor : tensors) {
                UUID uuid = Owner.newUuid();
                reserved.add(uuid);
                sent.add(send(requestId, tensor, uuid));
            }
            ok = true;
            return sent;
        } finally {
            if (!ok) {
                releaseAll(reserved);
            }
        }
    }

    private TensorDescriptor send(String requestId, Tensor tensor, UUID uuid) {
        long slot = reserveStamped(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), tensor.nbytes());
        if (slot == SegmentedArena.FULL) {
            return spill(requestId, tensor, uuid);
        }
        inFlight.track(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), slot, tensor.nbytes());
        MemorySegment memory = arena.segmentMemory(slot);
        MemorySegment.copy(tensor.data(), 0, memory, SegmentedArena.offset(slot), tensor.nbytes());
        return describe(uuid, requestId, tensor.dtype(), tensor.shape(), tensor.nbytes(), slot);
    }

    /** Sends one tensor and writes its descriptor's record at {@code offset} of {@code out}; allocates nothing. */
    int sendInto(String requestId, Tensor tensor, MemorySegment out, long offset) {
        TensorUuids uuids = TensorUuids.current();
        uuids.next();
        long msb = uuids.msb();
        long lsb = uuids.lsb();
        long nbytes = tensor.nbytes();
        long slot = reserveStamped(msb, lsb, nbytes);
        if (slot == SegmentedArena.FULL) {
            return DescriptorCodec.encode(spill(requestId, tensor, new UUID(msb, lsb)), out, offset);
        }
        boolean ok = false;
        try {
            inFlight.track(msb, lsb, slot, nbytes);
            MemorySegment memory = arena.segmentMemory(slot);
            MemorySegment.copy(tensor.data(), 0, memory, SegmentedArena.offset(slot), nbytes);
            int length = DescriptorCodec.encode(msb, lsb, requestId, arena.entity(), tensor, nbytes,
                Placement.ARENA, arena.segmentName(slot), SegmentedArena.offset(slot), out, offset);
            counters.sent(nbytes);
            ok = true;
            return length;
        } finally {
            if (!ok) {
                inFlight.release(msb, lsb, null);
            }
        }
    }

    /**
     * Claims room for one tensor: a slot, or where the ladder says spill, a file of its own mapped
     * writable. Neither is in flight before it is published. {@code reuse}: whether the thread's last claim object
     * may be rearmed for it (false for a claim made while that one may still be in its holder's hands).
     */
    TensorClaim claim(String requestId, DType dtype, long[] shape, boolean reuse) {
        long nbytes = Tensor.byteSize(dtype, shape);
        TensorUuids uuids = TensorUuids.current();
        uuids.next();
        long msb = uuids.msb();
        long lsb = uuids.lsb();
        long slot = reserveStamped(msb, lsb, nbytes);
        if (slot == SegmentedArena.FULL) {
            return spill.claim(requestId, dtype, shape.clone(), new UUID(msb, lsb), counters, true);
        }
        counters.claimOpened();
        if (!reuse) {
            return new SlotClaim(this).arm(requestId, dtype, shape, nbytes, msb, lsb, slot,
                arena.reservedMemory(slot, nbytes));
        }
        SlotClaim claim = lastClaim.get();
        if (claim == null || !claim.reusable()) { // the first of this thread's, or its last is still open
            claim = new SlotClaim(this);
            lastClaim.set(claim);
        }
        return claim.arm(requestId, dtype, shape, nbytes, msb, lsb, slot, arena.reservedMemory(slot, nbytes));
    }

    /** A claimed slot is in flight from now on: its descriptor. */
    TensorDescriptor publish(UUID uuid, String requestId, DType dtype, long[] shape, long nbytes, long slot) {
        arena.checkOpen(); // a claim outlived its transport: its slot is gone
        counters.claimEnded();
        inFlight.track(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), slot, nbytes);
        return describe(uuid, requestId, dtype, shape, nbytes, slot);
    }

    /** A claimed slot is in flight from now on: its descriptor's record, written at {@code offset} of {@code out}. */
    int publish(long msb, long lsb, String requestId, DType dtype, long[] shape, long nbytes, long slot,
                MemorySegment out, long offset) {
        arena.checkOpen();
        counters.claimEnded();
        inFlight.track(msb, lsb, slot, nbytes);
        return record(msb, lsb, requestId, dtype, shape, nbytes, slot, out, offset);
    }

    // The record of a tensor in flight in its slot, written at `offset` of `out`; counts it as sent.
    private int record(long msb, long lsb, String requestId, DType dtype, long[] shape, long nbytes, long slot,
                       MemorySegment out, long offset) {
        int length = DescriptorCodec.encode(msb, lsb, requestId, arena.entity(), dtype, shape, nbytes, Placement.ARENA,
            arena.segmentName(slot), SegmentedArena.offset(slot), out, offset);
        counters.sent(nbytes);
        return length;
    }

    /** A claimed slot goes back to the allocator; after the transport closed it went with the arena. */
    void abort(long slot, long nbytes) {
        if (arena.isClosed()) {
            return;
        }
        counters.claimEnded();
        arena.free(slot, nbytes);
        ladder.freed();
    }

    /** A slot for the tensor, stamped and tracked in flight from now on; or {@link SegmentedArena#FULL}: spill it. */
    long reserve(long msb, long lsb, long nbytes) {
        long slot = reserveStamped(msb, lsb, nbytes);
        if (slot != SegmentedArena.FULL) {
            inFlight.track(msb, lsb, slot, nbytes);
        }
        return slot;
    }

    /**
     * A slot up the ladder, stamped with the tensor that owns it from now on; or {@link SegmentedArena#FULL}.
     * The stamp lies past the tensor's bytes, so a segment another process shrank under us faults here first
     * (the JVM turns the SIGBUS into an {@link InternalError}): that segment is retired and the tensor takes a
     * slot in another.
     */
    private long reserveStamped(long msb, long lsb, long nbytes) {
        for (int attempt = 1; ; attempt++) {
            long slot = ladder.reserve(nbytes);
            if (slot == SegmentedArena.FULL) {
                return slot;
            }
            try {
                SlotStamp.write(arena.segmentMemory(slot), SegmentedArena.offset(slot), nbytes, msb, lsb);
                return slot;
            } catch (InternalError fault) {
                if (attempt > arena.maxSegments()) {
                    throw fault; // not a shrunk segment after all: nothing retiring one would fix
                }
                arena.retireShrunk(slot, fault);
                arena.free(slot);
                ladder.freed();
            }
        }
    }

    /** The address where the bytes of a reserved slot go (for native copies). */
    long address(long slot) {
        return arena.slotAddress(slot);
    }

    /** The descriptor of a tensor whose bytes have landed in its slot; counts it as sent. */
    TensorDescriptor describe(UUID uuid, String requestId, DType dtype, long[] shape, long nbytes, long slot) {
        counters.sent(nbytes);
        return new TensorDescriptor(uuid, requestId, arena.entity(), dtype, shape, nbytes, Placement.ARENA,
            arena.segmentName(slot), SegmentedArena.offset(slot));
    }

    /** Writes the tensor to a spill file of its own; counts it as spilled. */
    TensorDescriptor spill(String requestId, Tensor tensor, UUID uuid) {
        TensorDescriptor d = spill.write(requestId, tensor, uuid);
        counters.spilled(tensor.nbytes());
        return d;
    }

    /** Frees what a failed batch had reserved or written. */
    void releaseAll(List<UUID> uuids) {
        uuids.forEach(inFlight::release);
    }
}
