package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.acks.FanOutAcks;
import io.mstar.transport.acks.TensorFates;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.StatsFile;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.liveness.SlotHolds;
import io.mstar.transport.metrics.StatsJson;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.metrics.TransportJmx;
import io.mstar.transport.shm.MappedView;
import io.mstar.transport.shm.PeerSegments;
import io.mstar.transport.spill.SpillStore;
import io.mstar.transport.staging.DeviceTransfers;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.management.ObjectName;
import java.lang.foreign.MemorySegment;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.function.Supplier;

/**
 * The arena transport: a tensor lands once in a slot of this process's {@link SegmentedArena}, its
 * descriptor names (segment, offset), and the slot is freed on the consumer's ACK. This class wires the
 * roles together; a tensor's trip crosses each once:
 * <pre>
 *   send -&gt; SlotWriter -&gt; CapacityLadder (slot, wait, or spill: SpillStore) -&gt; InFlightTensors -&gt; descriptor
 *   ACK  -&gt; FanOutAcks (does it free now?) -&gt; ConsumerWatch.acked -&gt; InFlightTensors.release -&gt; CapacityLadder.freed
 * </pre>
 * The device path is {@link DevicePath}; the periodic work (stats line, TTL, liveness) runs on
 * {@link Maintenance}; every count is in {@link TransportCounters}. Consumer side: peer segments are
 * mapped once and cached ({@link PeerSegments}); views are read-only slices.
 */
public final class ArenaTransport implements TensorTransport, TensorRecords, TensorFates.Source {
    private static final Logger LOG = LoggerFactory.getLogger(ArenaTransport.class);

    private final TransportConfig config;
    private final SegmentedArena arena;
    private final SpillStore spill;
    private final PeerSegments peers;
    private final TransportCounters counters = new TransportCounters();
    static final int RECEIVE_TIMING_SAMPLE = 16;
    private long recordReceives; // racy across reading threads on purpose: it only picks which reads are timed
    private final FanOutAcks fanOut = new FanOutAcks(counters);
    private final InFlightTensors inFlight;
    private final SlotWriter writer;
    private final ConsumerWatch consumers;
    private final DevicePath device;
    private final Maintenance maintenance;
    private final StatsFile stats; // null when publishing is off (MSTAR_SHM_STATS_PUBLISH)
    private static final long PUBLISH_INTERVAL_MS = 1000;
    private static final long IDLE_PUBLISH_INTERVAL_NS = 10_000_000_000L;
    private long publishedActivity = -1; // the Maintenance thread's
    private long publishedAtNs;
    /** Characters per segment in the occupancy map of the stats file ({@code mstar-shm stats --map}). */
    static final int MAP_CELLS = 64;
    private final Future<ObjectName> jmxName;
    private final CloseOnce closer = new CloseOnce();
    private volatile TensorFates fates = TensorFates.NONE;
    private volatile Map<String, Supplier<? extends Record>> beside = Map.of(); // sections published with ours
    private volatile Supplier<String> stallHolds = () -> "no endpoint above: the application reads the ACKs";
    private volatile String role = "own"; // which of its entity's arenas this is, in the stats file
    private List<Record> publishedBeside = List.of(); // the Maintenance thread's

    /**
     * Opens an arena transport for a process of the deployment.
     *
     * @param logStats log the stats snapshot every {@value TransportConfig#STATS_INTERVAL_S}
     */
    public static ArenaTransport open(Deployment deployment, boolean logStats) {
        SegmentedArena arena = SegmentedArena.open(deployment);
        boolean ok = false;
        try {
            ArenaTransport transport = new ArenaTransport(deployment.config(), arena, logStats);
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
        arena.warnings().checkPinBudget(config.pin(), config.pinMaxMb() << 20);
        this.spill = new SpillStore(arena.owner());
        this.peers = new PeerSegments(arena.owner().dir(), counters);
        this.inFlight = new InFlightTensors(arena, spill);
        CapacityLadder ladder = new CapacityLadder(config, arena, counters, this::releaseExpired, inFlight::count);
        inFlight.wakes(ladder);
        this.writer = new SlotWriter(arena, ladder, inFlight, spill, counters);
        this.maintenance = new Maintenance(arena.entity());
        this.consumers = new ConsumerWatch(inFlight, fanOut, counters, maintenance);
        this.device = new DevicePath(config, arena, peers, writer, this::receive, this::checkOpen);
        this.stats = config.publishStats() ? new StatsFile(arena.owner()) : null;
        ShutdownCleanup.register(this);
        this.jmxName = TransportJmx.register(this, arena.owner().namespace().id(), arena.entity(), this::published);
        if (stats != null) {
            maintenance.every(0, PUBLISH_INTERVAL_MS, this::publishStats);
        }
        if (logStats) {
            maintenance.every(0, Math.max(1, config.statsInterval().toMillis()),
                () -> LOG.info("arena stats: {}", statsSummary().toLogLine()));
        }
        if (!config.stallWarn().isZero()) {
            StallWatch stalls = new StallWatch(inFlight, consumers::isAlive, config.stallWarn(), arena.entity(),
                () -> stallHolds.get());
            maintenance.every(StallWatch.CHECK_INTERVAL_MS, StallWatch.CHECK_INTERVAL_MS, stalls::check);
        }
        if (!config.slotTtl().isZero()) {
            long periodMs = Math.max(10, Math.min(1000, config.slotTtl().toMillis() / 2));
            maintenance.every(periodMs, periodMs, this::releaseExpired);
        }
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors) {
        checkOpen();
        return writer.send(requestId, tensors);
    }

    @Override
    public List<TensorDescriptor> send(String requestId, List<Tensor> tensors, List<String> consumerNames) {
        return fanOut.send(consumerNames, () -> send(requestId, tensors));
    }

    @Override
    public int sendInto(String requestId, Tensor tensor, MemorySegment out, long offset) {
        checkOpen();
        return writer.sendInto(requestId, tensor, out, offset);
    }

    @Override
    public int sendWritten(String requestId, DType dtype, long[] shape, TensorRecords.Writer bytes, MemorySegment out,
                           long offset) {
        // A claim written and published at once: the claim is this thread's reused one, so nothing is allocated.
        try (TensorClaim claim = claim(requestId, dtype, shape)) {
            bytes.write(claim.memory());
            return claim.publish(out, offset);
        }
    }

    @Override
    public TensorClaim claim(String requestId, DType dtype, long... shape) {
        checkOpen();
        return writer.claim(requestId, dtype, shape, true); // copied by the claim: the caller may reuse its array
    }

    /**
     * As {@link #claim}, with a claim object of its own that is never reused: for a claim made while this thread's
     * last one may still be in its holder's hands (a delivery listener called inside that holder's post).
     */
    public TensorClaim claimUnshared(String requestId, DType dtype, long... shape) {
        checkOpen();
        return writer.claim(requestId, dtype, shape, false);
    }

    @Override
    public TensorRecords records() {
        return this;
    }

    @Override
    public ReceivedTensor receive(TensorDescriptor d) {
        checkOpen();
        MappedView tensor = (d.placement() == Placement.SPILL ? spill.read(d) : peers.open(d))
            .timed(counters.receiveToRelease());
        counters.received();
        return tensor;
    }

    @Override
    public void receive(MemorySegment record, long offset, int length, TensorRecords.Reader reader) {
        checkOpen();
        String namespace = arena.owner().namespace().id();
        DescriptorCodec.validate(record, offset, length, namespace);
        if (DescriptorCodec.placement(record, offset) == Placement.SPILL) { // a file of its own: the usual way
            try (ReceivedTensor tensor = receive(DescriptorCodec.decode(record, offset, length, namespace))) {
                reader.read(tensor.data(), 0, tensor.data().byteSize());
            }
            return;
        }
        // One read in RECEIVE_TIMING_SAMPLE is timed: two clock reads per tensor cost as much as the rest of
        // a small tensor's receive on some VMs. The histogram's shape is the same; its count is 1/16 of reads.
        boolean timed = (++recordReceives & (RECEIVE_TIMING_SAMPLE - 1)) == 0;
        long start = timed ? System.nanoTime() : 0;
        peers.read(DescriptorCodec.fileName(record, offset), DescriptorCodec.tensorOffset(record, offset),
            DescriptorCodec.nbytes(record, offset), DescriptorCodec.uuidMsb(record, offset),
            DescriptorCodec.uuidLsb(record, offset), reader);
        counters.received();
        if (timed) {
            counters.receiveToRelease().record(System.nanoTime() - start);
        }
    }

    @Override
    public void ack(Collection<UUID> uuids) {
        for (UUID uuid : uuids) {
            if (fanOut.freesUnattributed(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits())) {
                release(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), uuid, false);
            }
        }
    }

    @Override
    public void ack(String consumer, Collection<UUID> uuids) {
        for (UUID uuid : uuids) {
            if (fanOut.frees(uuid, consumer)) {
                release(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), uuid, false);
            }
        }
    }

    @Override
    public void ack(long uuidMsb, long uuidLsb) {
        if (fanOut.freesUnattributed(uuidMsb, uuidLsb)) {
            release(uuidMsb, uuidLsb, null, false);
        }
    }

    @Override
    public void ack(String consumer, long uuidMsb, long uuidLsb) {
        free(consumer, uuidMsb, uuidLsb, false);
    }

    @Override
    public void refused(String consumer, long uuidMsb, long uuidLsb) {
        free(consumer, uuidMsb, uuidLsb, true);
    }

    private void free(String consumer, long uuidMsb, long uuidLsb, boolean refused) {
        if (fanOut.isEmpty()) { // no share to count: nothing to allocate
            release(uuidMsb, uuidLsb, null, refused);
        } else {
            UUID uuid = new UUID(uuidMsb, uuidLsb);
            if (fanOut.frees(uuid, consumer)) {
                release(uuidMsb, uuidLsb, uuid, refused);
            }
        }
    }

    @Override
    public void reportFatesTo(TensorFates reportTo) {
        this.fates = reportTo;
        consumers.reportFatesTo(reportTo);
    }

    // An ACK (or a refusal) that frees: the tensor's slot or spill file goes, and with it who held it.
    private void release(long msb, long lsb, UUID uuid, boolean refused) {
        consumers.acked(msb, lsb, uuid);
        long sentAt = inFlight.release(msb, lsb, uuid);
        counters.freed(sentAt, refused);
        if (sentAt == TransportCounters.NOT_IN_FLIGHT) {
            LOG.debug("ACK of a tensor not in flight, ignored: uuid={}", new UUID(msb, lsb));
        } else {
            fates.freed(msb, lsb, TensorFates.Fate.ACKED, null);
        }
    }

    @Override
    public <T> Optional<T> capability(Class<T> type) {
        if (type == DeviceTransfers.class) {
            return Optional.of(type.cast(device));
        }
        if (type == SlotHolds.class) {
            return Optional.of(type.cast(inFlight));
        }
        if (type == ConsumerLiveness.class) {
            return Optional.of(type.cast(consumers));
        }
        return Optional.empty();
    }

    /**
     * Makes the arena's first segment now, for a process that will send (a receive-only process never makes
     * one); a send or claim makes it otherwise.
     */
    public void prepareToSend() {
        checkOpen();
        arena.prepare();
    }

    /** Test seam: frees a tensor's slot under its reader, as a bug would (its outcome stays undecided). */
    void freeSlotUnderReader(UUID uuid) {
        inFlight.freeBehindTracking(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits());
    }

    /** Frees slots and spill files that waited longer than the TTL for their ACK; returns how many. */
    int releaseExpired() {
        if (config.slotTtl().isZero() || closer.isClosed()) {
            return 0;
        }
        TensorFates report = fates;
        int released = inFlight.releaseOlderThan(config.slotTtl(), uuid -> {
            consumers.forget(uuid);
            report.freed(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), TensorFates.Fate.EXPIRED, null);
        });
        counters.ttlReclaimed(released);
        return released;
    }

    // Logs the snapshot and rewrites the stats file that `mstar-shm stats` reads from other processes.
    private void publishStats() {
        long activity = counters.activity();
        long now = System.nanoTime();
        Map<String, Supplier<? extends Record>> sections = beside;
        List<Record> besides = sections.values().stream().<Record>map(Supplier::get).toList();
        if (activity == publishedActivity && besides.equals(publishedBeside)
            && now - publishedAtNs < IDLE_PUBLISH_INTERVAL_NS) {
            return; // nothing moved: an idle endpoint republishes every 10 s, and costs next to nothing between
        }
        publishedActivity = activity;
        publishedBeside = besides;
        publishedAtNs = now;
        TransportStats snapshot = statsSummary();
        StringBuilder line = new StringBuilder("arena=").append(role).append(' ').append(snapshot.toLogLine());
        StringBuilder json = new StringBuilder("{\"arena\":\"").append(role).append("\",\"stats\":")
            .append(StatsJson.of(snapshot));
        Map<String, Record> all = new LinkedHashMap<>();
        int i = 0;
        for (String name : sections.keySet()) {
            all.put(name, besides.get(i++));
        }
        long[] budget = arena.nodeBudget();
        if (budget != null) {
            all.put("nodeBudget", new NodeBudgetStats(budget[0], budget[1]));
        }
        try {
            String map = arena.occupancyMap(MAP_CELLS);
            // A line for people, then the same snapshot as JSON for machines (mstar-shm stats --json).
            all.forEach((name, record) -> {
                line.append(' ').append(StatsJson.logFields(name + ".", record));
                json.append(",\"").append(name).append("\":").append(StatsJson.of(record));
            });
            stats.write(line + " segmentMap=" + map + "\n" + json + ",\"segmentMap\":"
                + StatsJson.strings(List.of(map.split(","))) + "}");
        } catch (RuntimeException e) {
            LOG.debug("stats file not written: {}", e.toString());
        }
    }

    /** The deployment's node budget as the stats file shows it: its bytes, and what its arenas committed together. */
    record NodeBudgetStats(long budgetBytes, long committedBytes) {
    }

    /**
     * Publishes {@code snapshot} as section {@code name} beside this transport's stats in its stats file
     * ({@code mstar-shm stats}): the endpoint that owns this transport gives its mailbox's and its cross-node link's.
     */
    /** What the endpoint above says holds its outcomes now (unread ACKs, handlers, a listener), for the stall's WARN. */
    public void explainStallsWith(Supplier<String> holds) {
        stallHolds = holds;
    }

    public synchronized void publishBeside(String name, Supplier<? extends Record> snapshot) {
        Map<String, Supplier<? extends Record>> next = new LinkedHashMap<>(beside);
        next.put(name, snapshot);
        beside = next;
    }

    // A section published beside the stats, as it is now (null: none of that name).
    private Record published(String name) {
        Supplier<? extends Record> section = beside.get(name);
        return section == null ? null : section.get();
    }

    /** Names this arena's role in its stats file: {@code own} (the entity's arena), {@code landing} (the cross-node path's). */
    public void publishAs(String role) {
        this.role = role;
    }

    @Override
    public TransportStats statsSummary() {
        InFlightTensors.Oldest oldest = inFlight.oldest();
        return counters.snapshot("arena", arena.stats(), inFlight.count(),
            oldest == null ? 0 : System.nanoTime() - oldest.sentAtNs(), fanOut.partiallyAcked(), peers.mapped(),
            device.pinnedBytes(), device.pinnedSegments(), device.cudaSummary());
    }

    /**
     * Unlinks every file this transport created (spill files, then segments), for a process that is
     * stopping: peers keep the mappings they hold. Sending after this call creates new files.
     */
    public void unlinkOwnedFiles() {
        spill.unlinkAll();
        arena.unlinkSegments();
        if (stats != null) {
            stats.close(); // and publishes no more
        }
    }

    /**
     * Unlinks and unmaps everything. Idempotent; a second caller (the shutdown hook while the application
     * closes, say) returns only once the first one has finished, so the JVM never exits mid-close.
     */
    @Override
    public void close() {
        closer.close(() -> {
            ShutdownCleanup.unregister(this);
            TransportJmx.unregister(jmxName);
            counters.abandonOpenClaims(arena.entity());
            maintenance.close(); // a publish in progress ends before the stats file goes
            if (stats != null) {
                stats.close();
            }
            try {
                device.close(); // every pending copy lands before the mappings go
                spill.close();
            } finally {
                try {
                    arena.close();
                } finally {
                    peers.close();
                }
            }
        });
    }

    private void checkOpen() {
        if (closer.isClosed()) {
            throw new IllegalStateException("arena transport is closed: entity=" + arena.entity());
        }
    }
}
