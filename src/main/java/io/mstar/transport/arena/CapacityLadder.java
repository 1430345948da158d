package io.mstar.transport.arena;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.CapacityException;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.shm.SlotStamp;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntSupplier;

/**
 * The capacity ladder of one arena transport: where a tensor of {@code nbytes} goes.
 * <ol>
 *   <li>a slot in an existing segment; then a new segment, up to the cap and while the tmpfs can back it
 *       ({@link SegmentedArena#reserve});</li>
 *   <li>at the cap, wait for ACKs for {@value TransportConfig#SPILL_AFTER_S} (strict mode,
 *       {@value TransportConfig#SPILL}=0: up to {@value TransportConfig#FULL_TIMEOUT_S}), after freeing
 *       what outlived its TTL;</li>
 *   <li>spill: {@link SegmentedArena#FULL} tells the caller to write a file of its own; in strict mode a
 *       {@link CapacityException} instead.</li>
 * </ol>
 * Each wait is counted. Thread-safe; {@link #freed()} costs one volatile read while nobody waits.
 */
final class CapacityLadder {
    private static final Logger LOG = LoggerFactory.getLogger(CapacityLadder.class);
    private final TransportConfig config;
    private final SegmentedArena arena;
    private final TransportCounters counters;
    private final Runnable reclaimExpired;
    private final IntSupplier inFlight;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition slotFreed = lock.newCondition();
    private final AtomicInteger waiting = new AtomicInteger();
    // A spell of spilling: logged when it starts and when it ends, with what it spilled.
    private final AtomicBoolean spilling = new AtomicBoolean();
    private final AtomicLong spellTensors = new AtomicLong();
    private final AtomicLong spellBytes = new AtomicLong();
    private volatile long spellStartNs;

    /**
     * @param reclaimExpired frees what outlived its TTL, run before a send waits
     * @param inFlight       tensors in flight, for the strict-mode error message
     */
    CapacityLadder(TransportConfig config, SegmentedArena arena, TransportCounters counters, Runnable reclaimExpired,
                   IntSupplier inFlight) {
        this.config = config;
        this.arena = arena;
        this.counters = counters;
        this.reclaimExpired = reclaimExpired;
        this.inFlight = inFlight;
    }

    /**
     * A slot for {@code nbytes} and the tensor's stamp ({@link SlotStamp}; a zero-byte tensor still gets one,
     * so its ACK works alike), or {@link SegmentedArena#FULL}: spill it.
     *
     * @throws CapacityException in strict mode when the wait ended without a slot, or when interrupted
     */
    long reserve(long nbytes) {
        long size = SlotStamp.slotBytes(nbytes);
        long slot = arena.reserve(size);
        if (slot != SegmentedArena.FULL) {
            if (spilling.get()) {
                spellEnded();
            }
            return slot;
        }
        reclaimExpired.run();
        long budgetNs = (config.spill() ? config.spillAfter() : config.fullTimeout()).toNanos();
        long start = System.nanoTime();
        lock.lock();
        waiting.incrementAndGet(); // before the next try: a free after that try sees us and signals
        try {
            while ((slot = arena.reserve(size)) == SegmentedArena.FULL) {
                long left = budgetNs - (System.nanoTime() - start);
                if (left <= 0) {
                    break;
                }
                slotFreed.awaitNanos(left);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CapacityException("interrupted while waiting for ACKs on a full arena: entity=" + arena.entity(), e);
        } finally {
            waiting.decrementAndGet();
            lock.unlock();
        }
        if (budgetNs > 0) {
            counters.waited(System.nanoTime() - start);
        }
        if (slot != SegmentedArena.FULL) {
            return slot;
        }
        if (config.spill()) {
            spills(nbytes);
            return slot;
        }
        throw new CapacityException("arena full: no slot of " + nbytes + " bytes after waiting "
            + config.fullTimeout().toMillis() + " ms for ACKs in strict mode (" + TransportConfig.SPILL + "=0): entity="
            + arena.entity() + ", segments=" + arena.stats().segments() + ", inFlight=" + inFlight.getAsInt()
            + ": make consumers ACK sooner, raise " + TransportConfig.MAX_SEGMENTS + " or " + TransportConfig.SEGMENT_MB
            + ", or set " + TransportConfig.SPILL + "=1");
    }

    // The caller spills this tensor: the first of a spell says so, at WARN.
    private void spills(long nbytes) {
        if (spilling.compareAndSet(false, true)) {
            spellStartNs = System.nanoTime();
            spellTensors.set(0);
            spellBytes.set(0);
            LOG.warn("the arena is full: tensors spill to a file each from now on (slower) until slots come free:"
                + " entity={}, segments={}, inFlight={}: make consumers ACK sooner, or raise {} or {}", arena.entity(),
                arena.stats().segments(), inFlight.getAsInt(), TransportConfig.MAX_SEGMENTS, TransportConfig.SEGMENT_MB);
        }
        spellTensors.incrementAndGet();
        spellBytes.addAndGet(nbytes);
    }

    private void spellEnded() {
        if (spilling.compareAndSet(true, false)) {
            LOG.info("spilling stopped, tensors go into the arena again: entity={}, {} tensors ({} bytes) spilled over"
                + " {} ms", arena.entity(), spellTensors.get(), spellBytes.get(),
                (System.nanoTime() - spellStartNs) / 1_000_000);
        }
    }

    /** A slot was freed: wakes the sends waiting for one. */
    void freed() {
        if (waiting.get() == 0) {
            return;
        }
        lock.lock();
        try {
            slotFreed.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
