package io.mstar.transport.arena;

import io.mstar.transport.CapacityException;
import io.mstar.transport.DeviceTensor;
import io.mstar.transport.Placement;
import io.mstar.transport.StagedBatch;
import io.mstar.transport.StagingRequest;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.acks.FanOutAcks;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.cuda.CopyEngine;
import io.mstar.transport.cuda.CudaProbe;
import io.mstar.transport.cuda.CudaStatus;
import io.mstar.transport.cuda.PinnedSegments;
import io.mstar.transport.lifecycle.Namespace;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.StatsFile;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappingListener;
import io.mstar.transport.shm.PeerSegments;
import io.mstar.transport.spill.FileTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;

/**
 * The arena transport: a tensor lands once in a slot of this process's {@link SegmentedArena}, its
 * descriptor names (segment, offset), and the slot is freed on the consumer's ACK.
 *
 * <h2>Capacity ladder</h2>
 * <ol>
 *   <li>a slot in an existing segment; 2. a new segment, up to the cap and while the tmpfs can back it;</li>
 *   <li>at the cap, wait for ACKs for {@code MSTAR_SHM_ARENA_SPILL_AFTER_S} (strict mode,
 *       {@code MSTAR_SHM_ARENA_SPILL=0}: up to {@code MSTAR_SHM_ARENA_FULL_TIMEOUT_S});</li>
 *   <li>spill the tensor to a file of its own, or in strict mode fail with {@link CapacityException}.</li>
 * </ol>
 * Each rung is counted in the stats. Slots unACKed for longer than {@code MSTAR_SHM_ARENA_SLOT_TTL_S}
 * (when set) are reclaimed with a warning.
 *
 * <h2>Consumer side</h2>
 * Peer segments are mapped once and cached ({@link PeerSegments}); views are read-only slices.
 *
 * <h2>Device tensors</h2>
 * The first device call probes CUDA; when it is usable the transport creates its copy stream and, with
 * {@code MSTAR_SHM_ARENA_PIN=1}, registers every mapped segment (own and peers', now and later) within
 * the pin budget, unregistering each before it is unmapped.
 */
public final class ArenaTransport implements TensorTransport {
    private static final Logger LOG = LoggerFactory.getLogger(ArenaTransport.class);
    /** How often consumers with tensors in flight are checked for liveness, once a check is set. */
    static final long LIVENESS_CHECK_MS = 500;

    private final TransportConfig config;
    private final SegmentedArena arena;
    private final FileTransport spill;
    private final PeerSegments peers;
    private final StatsFile stats; // null when stats logging is off
    private final String entity;
    private final InFlightTable inFlight = new InFlightTable(); // guarded by itself
    private final ReentrantLock ackLock = new ReentrantLock();
    private final Condition acked = ackLock.newCondition();
    private final ScheduledExecutorService maintenance;
    private ScheduledExecutorService livenessChecks; // guarded by this; created by consumerLiveness
    private volatile MappingListener pins = MappingListener.NONE;
    private CudaStatus cudaStatus;   // guarded by this; null until the first device call
    private CopyEngine copyEngine;   // guarded by this
    private PinnedSegments pinned;   // guarded by this

    private final AtomicLong tensorsSent = new AtomicLong();
    private final AtomicLong bytesSent = new AtomicLong();
    private final AtomicLong spills = new AtomicLong();
    private final AtomicLong spillBytes = new AtomicLong();
    private final AtomicLong waits = new AtomicLong();
    private final AtomicLong waitNs = new AtomicLong();
    private final AtomicLong acks = new AtomicLong();
    private final AtomicLong unknownAcks = new AtomicLong();
    private final AtomicLong ignoredAcks = new AtomicLong();
    private final FanOutAcks fanOut = new FanOutAcks();
    private final AtomicLong ttlReclaims = new AtomicLong();
    private final AtomicLong deadConsumerReclaims = new AtomicLong();
    private final Map<UUID, String> consumerOf = new ConcurrentHashMap<>();
    private volatile Predicate<String> consumerAlive;
    private final Set<String> deadConsumersReported = ConcurrentHashMap.newKeySet();
    private final AtomicLong tensorsReceived = new AtomicLong();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Object closing = new Object(); // a second close waits for the first to finish


    /**
     * Opens an arena transport in {@code config.shmDir()}.
     *
     * @param logStats log the stats snapshot every {@code MSTAR_SHM_ARENA_STATS_INTERVAL_S}
     */
    public static ArenaTransport open(TransportConfig config, Namespace namespace, String entity, boolean logStats) {
        SegmentedArena arena = SegmentedArena.open(config, namespace, entity);
        boolean ok = false;
        try {
            ArenaTransport transport = new ArenaTransport(config, arena, logStats);
            ok = true;
            return transport;
        } finally {
            if (!ok) {
                arena.close();
            }
        }
    }

    /** A transport over an arena built by the caller (tests use small segments). */
    public ArenaTransport(TransportConfig config, SegmentedArena arena, boolean logStats) {
        this.config = config;
        this.arena = arena;
        this.entity = arena.entity();
        arena.warnings().checkPinBudget(config.pin(), config.pinMaxMb() << 20);
        this.spill = new FileTransport(arena.owner(), config.reclaimInterval());
        this.stats = logStats ? new StatsFile(arena.owner()) : null;
        this.peers = new PeerSegments(arena.owner().dir(), new MappingListener() {
            @Override
            public void mapped(MappedSegment segment) {
                pins.mapped(segment);
            }

            @Override
            public void unmapping(MappedSegment segment) {
                pins.unmapping(segment);
            }
        });
        ShutdownCleanup.register(this);
        boolean ttl = !config.slotTtl().isZero();
        if (logStats || ttl) {
            maintenance = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "mstar-arena-maintenance-" + entity);
                t.setDaemon(true);
                return t;
            });
            if (logStats) {
                long periodMs = Math.max(1, config.statsInterval().toMillis());
                maintenance.scheduleAtFixedRate(this::publishStats, 0, periodMs, TimeUnit.MILLISECONDS);
            }
            if (ttl) {
                long periodMs = Math.max(10, Math.min(1000, config.slotTtl().toMillis() / 2));
                maintenance.scheduleAtFixedRate(this::reclaimExpired, periodMs, periodMs, TimeUnit.MILLISECONDS);
            }
        } else {
            maintenance = null;
        }

    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors) {
        checkOpen();
        List<TensorDescriptor> sent = new ArrayList<>(tensors.size());
        List<UUID> reserved = new ArrayList<>(tensors.size());
        boolean ok = false;
        try {
            for (Tensor tensor : tensors) {
                UUID uuid = FileTransport.newUuid();
                reserved.add(uuid);
                sent.add(sendOne(requestId, tensor, uuid));
            }
            ok = true;
            return sent;
        } finally {
            if (!ok) {
                // Nothing of a failed batch stays reserved: the caller may retry it whole.
                reserved.forEach(this::releaseTensor);
            }
        }
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors, List<String> consumers) {
        return fanOut.send(consumers, () -> send(requestId, tensors));
    }

    private TensorDescriptor sendOne(String requestId, Tensor tensor, UUID uuid) {
        long nbytes = tensor.nbytes();
        long slot = reserve(nbytes);
        if (slot == SegmentedArena.FULL) {
            TensorDescriptor d = spill.write(requestId, tensor, uuid);
            spills.incrementAndGet();
            spillBytes.addAndGet(nbytes);
            count(nbytes);
            return d;
        }
        track(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), slot, nbytes);
        MemorySegment.copy(tensor.data(), 0, arena.segmentMemory(slot), SegmentedArena.offset(slot), nbytes);
        count(nbytes);
        return new TensorDescriptor(uuid, requestId, entity, tensor.dtype(), tensor.shape(), nbytes,
            Placement.ARENA, arena.segmentName(slot), SegmentedArena.offset(slot));
    }

    private void count(long nbytes) {
        tensorsSent.incrementAndGet();
        bytesSent.addAndGet(nbytes);
    }

    // The capacity ladder; FULL means "spill".
    private long reserve(long nbytes) {
        long size = Math.max(1, nbytes); // a zero-byte tensor still gets a slot, so its ACK works alike
        long slot = arena.reserve(size);
        if (slot != SegmentedArena.FULL) {
            return slot;
        }
        reclaimExpired();
        long budgetNs = (config.spill() ? config.spillAfter() : config.fullTimeout()).toNanos();
        long start = System.nanoTime();
        ackLock.lock();
        try {
            while ((slot = arena.reserve(size)) == SegmentedArena.FULL) {
                long left = budgetNs - (System.nanoTime() - start);
                if (left <= 0) {
                    break;
                }
                acked.awaitNanos(left);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CapacityException("interrupted while waiting for ACKs on a full arena: entity=" + entity, e);
        } finally {
            ackLock.unlock();
        }
        if (budgetNs > 0) {
            waits.incrementAndGet();
            waitNs.addAndGet(System.nanoTime() - start);
        }
        if (slot != SegmentedArena.FULL || config.spill()) {
            return slot;
        }
        throw new CapacityException("arena full: no slot of " + nbytes + " bytes after waiting "
            + config.fullTimeout().toMillis() + " ms for ACKs in strict mode (" + TransportConfig.SPILL + "=0): entity="
            + entity + ", segments=" + arena.stats().segments() + ", inFlight=" + inFlightCount()
            + ": make consumers ACK sooner, raise " + TransportConfig.MAX_SEGMENTS + " or " + TransportConfig.SEGMENT_MB
            + ", or set " + TransportConfig.SPILL + "=1");
    }

    @Override
    public ReceivedTensor receive(TensorDescriptor d) {
        checkOpen();
        ReceivedTensor tensor = d.placement() == Placement.SPILL ? spill.receive(d) : peers.open(d);
        tensorsReceived.incrementAndGet();
        return tensor;
    }

    @Override
    public List<TensorDescriptor> sendFromDevice(String requestId, List<DeviceTensor> tensors) {
        return stageFromDevice(List.of(new StagingRequest<>(requestId, tensors)), false).descriptors().getFirst();
    }

    @Override
    public StagedBatch stageFromDevice(List<StagingRequest<DeviceTensor>> requests, boolean sourcesSynchronized) {
        checkOpen();
        CopyEngine engine = copyEngine();
        int n = requests.stream().mapToInt(r -> r.tensors().size()).sum();
        List<UUID> uuids = new ArrayList<>(n);
        long[] slots = new long[n];
        long[] hosts = new long[n];
        long[] devices = new long[n];
        long[] bytes = new long[n];
        boolean ok = false;
        try {
            int i = 0;
            for (StagingRequest<DeviceTensor> r : requests) {
                for (DeviceTensor t : r.tensors()) {
                    UUID uuid = FileTransport.newUuid();
                    uuids.add(uuid);
                    bytes[i] = t.nbytes();
                    devices[i] = t.devicePointer();
                    slots[i] = reserve(bytes[i]);
                    if (slots[i] != SegmentedArena.FULL) {
                        track(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), slots[i], bytes[i]);
                        hosts[i] = arena.slotAddress(slots[i]);
                    }
                    i++;
                }
            }
            engine.deviceToHost(pick(hosts, slots, true), pick(devices, slots, true), pick(bytes, slots, true),
                sourcesSynchronized);
            List<List<TensorDescriptor>> perRequest = new ArrayList<>(requests.size());
            i = 0;
            for (StagingRequest<DeviceTensor> r : requests) {
                List<TensorDescriptor> sent = new ArrayList<>(r.tensors().size());
                for (DeviceTensor t : r.tensors()) {
                    if (slots[i] == SegmentedArena.FULL) {
                        sent.add(spillFromDevice(engine, r.requestId(), t, uuids.get(i)));
                    } else {
                        count(bytes[i]);
                        sent.add(new TensorDescriptor(uuids.get(i), r.requestId(), entity, t.dtype(), t.shape(), bytes[i],
                            Placement.ARENA, arena.segmentName(slots[i]), SegmentedArena.offset(slots[i])));
                    }
                    i++;
                }
                perRequest.add(sent);
            }
            ok = true;
            return StagedBatch.of(perRequest);
        } finally {
            if (!ok) {
                uuids.forEach(this::releaseTensor);
            }
        }
    }

    // The entries of `values` whose slot is (or is not) in the arena.
    private static long[] pick(long[] values, long[] slots, boolean inArena) {
        int count = 0;
        for (long slot : slots) {
            count += (slot != SegmentedArena.FULL) == inArena ? 1 : 0;
        }
        long[] picked = new long[count];
        for (int i = 0, j = 0; i < slots.length; i++) {
            if ((slots[i] != SegmentedArena.FULL) == inArena) {
                picked[j++] = values[i];
            }
        }
        return picked;
    }

    // The spill path of a device tensor: staged through host memory, then written to its file.
    private TensorDescriptor spillFromDevice(CopyEngine engine, String requestId, DeviceTensor t, UUID uuid) {
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment host = staging.allocate(Math.max(1, t.nbytes()), 4096).asSlice(0, t.nbytes());
            // The batch's copies already waited for the default stream.
            engine.deviceToHost(new long[] {host.address()}, new long[] {t.devicePointer()}, new long[] {t.nbytes()}, true);
            TensorDescriptor d = spill.write(requestId, new Tensor(t.dtype(), t.shape(), host), uuid);
            spills.incrementAndGet();
            spillBytes.addAndGet(t.nbytes());
            count(t.nbytes());
            return d;
        }
    }

    @Override
    public CompletableFuture<TensorDescriptor> copyToDevice(TensorDescriptor d, long devicePointer) {
        checkOpen();
        CopyEngine engine = copyEngine();
        ReceivedTensor view = receive(d);
        try {
            MemorySegment data = view.data();
            if (!data.isNative()) {
                // A spill file read into the heap: stage it in native memory and copy synchronously.
                try (Arena staging = Arena.ofConfined()) {
                    MemorySegment host = staging.allocate(Math.max(1, d.nbytes()), 4096);
                    MemorySegment.copy(data, 0, host, 0, d.nbytes());
                    engine.hostToDevice(devicePointer, host.address(), d.nbytes()).join();
                }
                view.close();
                return CompletableFuture.completedFuture(d);
            }
            // The view holds the mapping until the copy's event completed.
            return engine.hostToDevice(devicePointer, data.address(), d.nbytes())
                .whenComplete((ignored, failure) -> view.close())
                .thenApply(ignored -> d);
        } catch (RuntimeException e) {
            view.close();
            throw e;
        }
    }

    // Probes CUDA on the first device call; afterwards the copy stream, or the probe's reason as an exception.
    private synchronized CopyEngine copyEngine() {
        if (cudaStatus == null) {
            cudaStatus = CudaProbe.probe(config);
            if (cudaStatus.usable()) {
                copyEngine = new CopyEngine(cudaStatus.runtime());
                if (config.pin()) {
                    pinned = new PinnedSegments(cudaStatus.runtime(), config.pinMaxMb() << 20);
                    pins = pinned;
                    arena.mappingListener(pinned);
                    peers.notifyMapped(pinned);
                }
            }
        }
        if (copyEngine == null) {
            throw new IllegalStateException("device tensors need a usable CUDA runtime: " + cudaStatus.reason());
        }
        return copyEngine;
    }

    @Override
    public void ack(Collection<UUID> uuids) {
        boolean freed = false;
        for (UUID uuid : uuids) {
            freed |= ackOne(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), uuid, false);
        }
        if (freed) {
            signalAcked();
        }
    }

    @Override
    public void ack(String consumer, Collection<UUID> uuids) {
        boolean freed = false;
        for (UUID uuid : uuids) {
            if (!fanOut.isEmpty()) {
                FanOutAcks.Outcome outcome = fanOut.ack(uuid, consumer);
                if (outcome == FanOutAcks.Outcome.PENDING) {
                    continue;
                }
                if (outcome == FanOutAcks.Outcome.REPEATED || outcome == FanOutAcks.Outcome.NOT_NAMED) {
                    ignoredAcks.incrementAndGet();
                    LOG.debug("ACK ignored ({}): consumer={}, uuid={}", outcome, consumer, uuid);
                    continue;
                }
            }
            freed |= ackOne(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), uuid, true);
        }
        if (freed) {
            signalAcked();
        }
    }

    @Override
    public void ack(long uuidMsb, long uuidLsb) {
        if (ackOne(uuidMsb, uuidLsb, null, false)) {
            signalAcked();
        }
    }

    // True when an arena slot was freed; `uuid` is the same uuid as an object when the caller has one.
    // An ACK that does not say which consumer sent it cannot count for a fan-out tensor.
    private boolean ackOne(long msb, long lsb, UUID uuid, boolean attributed) {
        if (!attributed && !fanOut.isEmpty() && fanOut.contains(uuid != null ? uuid : new UUID(msb, lsb))) {
            ignoredAcks.incrementAndGet();
            return false;
        }
        if (!consumerOf.isEmpty()) {
            consumerOf.remove(uuid != null ? uuid : new UUID(msb, lsb));
        }
        long slot = untrack(msb, lsb);
        if (slot != InFlightTable.MISSING) {
            arena.free(slot);
            acks.incrementAndGet();
            return true;
        }
        UUID id = uuid != null ? uuid : new UUID(msb, lsb);
        if (spill.release(id)) {
            acks.incrementAndGet();
        } else {
            unknownAcks.incrementAndGet();
            LOG.debug("ACK of a tensor not in flight, ignored: uuid={}", id);
        }
        return false;
    }

    @Override
    public int sendInto(String requestId, Tensor tensor, MemorySegment out, long offset) {
        checkOpen();
        ThreadLocalRandom random = ThreadLocalRandom.current();
        long msb = random.nextLong();
        long lsb = random.nextLong();
        long nbytes = tensor.nbytes();
        long slot = reserve(nbytes);
        if (slot == SegmentedArena.FULL) {
            TensorDescriptor d = spill.write(requestId, tensor, new UUID(msb, lsb));
            spills.incrementAndGet();
            spillBytes.addAndGet(nbytes);
            count(nbytes);
            return DescriptorCodec.encode(d, out, offset);
        }
        track(msb, lsb, slot, nbytes);
        boolean ok = false;
        try {
            MemorySegment.copy(tensor.data(), 0, arena.segmentMemory(slot), SegmentedArena.offset(slot), nbytes);
            int length = DescriptorCodec.encode(msb, lsb, requestId, entity, tensor.dtype(), tensor, nbytes,
                Placement.ARENA, arena.segmentName(slot), SegmentedArena.offset(slot), out, offset);
            count(nbytes);
            ok = true;
            return length;
        } finally {
            if (!ok && untrack(msb, lsb) != InFlightTable.MISSING) {
                arena.free(slot);
            }
        }
    }

    private void track(long msb, long lsb, long slot, long nbytes) {
        synchronized (inFlight) {
            inFlight.put(msb, lsb, slot, nbytes, System.nanoTime());
        }
    }

    private long untrack(long msb, long lsb) {
        synchronized (inFlight) {
            return inFlight.remove(msb, lsb);
        }
    }

    private int inFlightCount() {
        synchronized (inFlight) {
            return inFlight.size();
        }
    }

    @Override
    public void sentTo(String consumer, Collection<UUID> uuids) {
        if (!fanOut.isEmpty()) {
            int at = consumer.indexOf('@');
            String entity = at < 0 ? consumer : consumer.substring(0, at);
            uuids.forEach(uuid -> fanOut.delivered(uuid, entity, consumer));
        }
        for (UUID uuid : uuids) {
            boolean inArena;
            synchronized (inFlight) {
                inArena = inFlight.contains(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits());
            }
            if ((inArena || spill.isInFlight(uuid)) && !fanOut.contains(uuid)) {
                consumerOf.put(uuid, consumer);
            }
        }
    }

    @Override
    public synchronized void consumerLiveness(Predicate<String> alive) {
        consumerAlive = alive;
        if (livenessChecks == null) {
            livenessChecks = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "mstar-arena-liveness-" + entity);
                t.setDaemon(true);
                return t;
            });
            livenessChecks.scheduleWithFixedDelay(this::reclaimFromDeadConsumers, LIVENESS_CHECK_MS, LIVENESS_CHECK_MS,
                TimeUnit.MILLISECONDS);
        }
    }

    /** Frees the tensors sent to consumers that died before ACKing them; returns how many. */
    int reclaimFromDeadConsumers() {
        Predicate<String> alive = consumerAlive;
        if (alive == null || closed.get() || (consumerOf.isEmpty() && fanOut.isEmpty())) {
            return 0;
        }
        Map<String, Boolean> verdicts = new HashMap<>();
        Predicate<String> aliveOnce = key -> verdicts.computeIfAbsent(key, alive::test);
        int reclaimed = 0;
        for (Map.Entry<UUID, String> e : consumerOf.entrySet()) {
            if (!aliveOnce.test(e.getValue()) && consumerOf.remove(e.getKey(), e.getValue()) && releaseTensor(e.getKey())) {
                reclaimed++;
            }
        }
        for (UUID uuid : fanOut.dropDead(aliveOnce)) { // the dead consumers' shares go; the last share frees
            if (releaseTensor(uuid)) {
                reclaimed++;
            }
        }
        deadConsumerReclaims.addAndGet(reclaimed);
        // One warning per dead consumer incarnation (an incident), however many checks find more of its tensors.
        verdicts.forEach((consumer, live) -> {
            if (!live && deadConsumersReported.add(consumer)) {
                LOG.warn("consumer died before ACKing: consumer={}; what only it held is freed, its share of fan-out"
                    + " tensors released (count in deadConsumerReclaims)", consumer);
            }
        });
        if (deadConsumersReported.size() > 4096) {
            deadConsumersReported.clear();
        }
        return reclaimed;
    }

    // Frees a tensor's slot or spill file; false when it was not in flight.
    private boolean releaseTensor(UUID uuid) {
        consumerOf.remove(uuid);
        fanOut.remove(uuid);
        long slot = untrack(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits());
        if (slot != InFlightTable.MISSING) {
            arena.free(slot);
            signalAcked();
            return true;
        }
        return spill.release(uuid);
    }

    private void signalAcked() {
        ackLock.lock();
        try {
            acked.signalAll();
        } finally {
            ackLock.unlock();
        }
    }

    // Logs the snapshot and rewrites the stats file that `mstar-shm stats` reads from other processes.
    private void publishStats() {
        String line = statsSummary().toLogLine();
        LOG.info("arena stats: {}", line);
        try {
            stats.write(line);
        } catch (RuntimeException e) {
            LOG.debug("stats file not written: {}", e.toString());
        }
    }

    /** Frees slots that waited longer than the TTL for their ACK; returns how many. */
    int reclaimExpired() {
        long ttlNs = config.slotTtl().toNanos();
        if (ttlNs == 0 || closed.get()) {
            return 0;
        }
        long now = System.nanoTime();
        List<long[]> expired = new ArrayList<>();
        synchronized (inFlight) {
            inFlight.removeOlderThan(now - ttlNs, (msb, lsb, slot, nbytes, sentAt) ->
                expired.add(new long[] {msb, lsb, slot, nbytes, sentAt}));
        }
        long oldestMs = 0;
        for (long[] e : expired) {
            UUID uuid = new UUID(e[0], e[1]);
            consumerOf.remove(uuid);
            fanOut.remove(uuid);
            arena.free(e[2]);
            oldestMs = Math.max(oldestMs, (now - e[4]) / 1_000_000);
        }
        List<UUID> expiredSpills = spill.releaseOlderThan(now - ttlNs);
        expiredSpills.forEach(consumerOf::remove);
        expiredSpills.forEach(fanOut::remove);
        if (!expired.isEmpty() || !expiredSpills.isEmpty()) {
            LOG.warn("reclaimed tensors that got no ACK within {}={}: slots={}, spillFiles={}, oldestSlotAgeMs={}",
                TransportConfig.SLOT_TTL_S, config.slotTtl().toMillis() / 1000.0, expired.size(), expiredSpills.size(),
                oldestMs);
        }
        int reclaimed = expired.size() + expiredSpills.size();
        if (reclaimed > 0) {
            ttlReclaims.addAndGet(reclaimed);
            signalAcked();
        }
        return reclaimed;
    }

    @Override
    public TransportStats statsSummary() {
        return new TransportStats("arena", arena.stats(), tensorsSent.get(), bytesSent.get(),
            inFlightCount() + spill.inFlight(), spills.get(), spillBytes.get(), waits.get(), waitNs.get(), acks.get(),
            unknownAcks.get(), ignoredAcks.get(), fanOut.partiallyAcked(), ttlReclaims.get(), deadConsumerReclaims.get(),
            tensorsReceived.get(), peers.mapped(),
            pinnedBytes(), pinnedSegments(),
            cudaSummary());
    }

    private synchronized long pinnedBytes() {
        return pinned == null ? 0 : pinned.pinnedBytes();
    }

    private synchronized int pinnedSegments() {
        return pinned == null ? 0 : pinned.pinnedSegments();
    }

    private synchronized String cudaSummary() {
        return cudaStatus == null ? "not used yet" : cudaStatus.reason();
    }

    @Override
    public void unlinkOwnedFiles() {
        spill.unlinkOwnedFiles();
        arena.unlinkSegments();
    }

    /**
     * Unlinks and unmaps everything. Idempotent; a second caller (the shutdown hook while the application
     * closes, say) returns only once the first one has finished, so the JVM never exits mid-close.
     */
    @Override
    public void close() {
        synchronized (closing) {
            closeOnce();
        }
    }

    private void closeOnce() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        ShutdownCleanup.unregister(this);
        if (maintenance != null) {
            maintenance.shutdownNow();
            try {
                maintenance.awaitTermination(5, TimeUnit.SECONDS); // a publish in progress ends before the removal
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (stats != null) {
            stats.close();
        }
        synchronized (this) {
            if (livenessChecks != null) {
                livenessChecks.shutdownNow();
            }
        }
        try {
            synchronized (this) {
                if (copyEngine != null) {
                    copyEngine.close(); // every pending copy lands before the mappings go
                }
            }
            spill.close();
        } finally {
            try {
                arena.close();
            } finally {
                peers.close();
            }
        }
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new IllegalStateException("arena transport is closed: entity=" + entity);
        }
    }
}
