package io.mstar.transport.arena;

import io.mstar.transport.acks.FanOutAcks;
import io.mstar.transport.acks.TensorFates;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.metrics.TransportCounters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;

/**
 * Which consumer holds each tensor of one arena transport (a slot's in the {@link InFlightTable}, allocation
 * free; a spill file's here), and freeing what a dead consumer held: a
 * tensor sent to one consumer goes with it; a fan-out tensor loses that consumer's share and goes with
 * its last share ({@link FanOutAcks}). Once {@link #watch} is called, the consumers are checked every
 * {@value #CHECK_INTERVAL_MS} ms on the transport's {@link Maintenance} thread. Thread-safe.
 */
final class ConsumerWatch implements ConsumerLiveness {
    private static final Logger LOG = LoggerFactory.getLogger(ConsumerWatch.class);
    /** How often consumers with tensors in flight are checked for liveness, once a check is set. */
    static final long CHECK_INTERVAL_MS = 500;
    /** The key of a share that reached no incarnation of its consumer: dead without asking. */
    static final String NEVER_REACHED = "@never-reached";
    /** Dead incarnations remembered so that each is reported once; beyond this the memory starts again. */
    private static final int REPORTED_MAX = 4096;

    private final InFlightTensors inFlight;
    private final FanOutAcks fanOut;
    private final TransportCounters counters;
    private final Maintenance maintenance;
    private final Map<UUID, String> consumerOf = new ConcurrentHashMap<>();
    private final Set<String> deadReported = ConcurrentHashMap.newKeySet();
    private volatile Predicate<String> alive;
    private volatile TensorFates fates = TensorFates.NONE;

    ConsumerWatch(InFlightTensors inFlight, FanOutAcks fanOut, TransportCounters counters, Maintenance maintenance) {
        this.inFlight = inFlight;
        this.fanOut = fanOut;
        this.counters = counters;
        this.maintenance = maintenance;
    }

    @Override
    public void sentTo(String consumer, Collection<UUID> uuids) {
        if (!fanOut.isEmpty()) {
            int at = consumer.indexOf('@');
            String entity = at < 0 ? consumer : consumer.substring(0, at);
            uuids.forEach(uuid -> fanOut.delivered(uuid, entity, consumer));
        }
        for (UUID uuid : uuids) {
            if (!fanOut.contains(uuid) && !inFlight.sentTo(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(),
                consumer) && inFlight.contains(uuid)) {
                consumerOf.put(uuid, consumer); // a spill file's
            }
        }
    }

    /** As {@link #sentTo(String, Collection)} for one tensor: allocates nothing for a slot's tensor (no fan-out). */
    @Override
    public void sentTo(String consumer, long uuidMsb, long uuidLsb) {
        if (fanOut.isEmpty() && inFlight.sentTo(uuidMsb, uuidLsb, consumer)) {
            return;
        }
        sentTo(consumer, List.of(new UUID(uuidMsb, uuidLsb)));
    }

    /** The share of a consumer that no incarnation got: taken as a dead consumer's at the next check. */
    @Override
    public void neverReached(String consumer, Collection<UUID> uuids) {
        if (!fanOut.isEmpty()) {
            uuids.forEach(uuid -> fanOut.delivered(uuid, consumer, consumer + NEVER_REACHED));
        }
    }

    @Override
    public synchronized void watch(Predicate<String> isAlive) {
        boolean first = alive == null;
        alive = isAlive;
        if (first) {
            maintenance.every(CHECK_INTERVAL_MS, CHECK_INTERVAL_MS, this::releaseFromDeadConsumers);
        }
    }

    /** Whether a consumer (a liveness key) lives, as far as the check set by {@link #watch} says; true without one. */
    boolean isAlive(String consumer) {
        Predicate<String> check = alive;
        return check == null || check.test(consumer);
    }

    void reportFatesTo(TensorFates reportTo) {
        this.fates = reportTo;
    }

    /** The tensor was freed by the TTL: nobody holds it any more. */
    void forget(UUID uuid) {
        consumerOf.remove(uuid);
        fanOut.remove(uuid);
    }

    /**
     * An ACK frees the tensor (a fan-out tensor's entry went with its last share). {@code uuid} is the same
     * uuid as an object, or null: one is made only while some tensor has a known consumer.
     */
    void acked(long msb, long lsb, UUID uuid) {
        if (!consumerOf.isEmpty()) {
            consumerOf.remove(uuid != null ? uuid : new UUID(msb, lsb));
        }
    }

    /** Frees the tensors held only by consumers that died before ACKing them; returns how many. */
    int releaseFromDeadConsumers() {
        Predicate<String> check = alive;
        if (check == null) {
            return 0;
        }
        Set<String> dead = deadHolders(check);
        if (dead.isEmpty()) {
            return 0;
        }
        TensorFates report = fates;
        report.settle(); // an ACK a consumer sent before it exited may still wait to be read: it decides first
        Map<String, int[]> held = new HashMap<>(); // per dead incarnation: tensors freed, shares released
        int released = 0;
        for (Object[] tensor : inFlight.heldBy(dead)) { // tensors in slots: their holder is in the table
            long msb = (long) tensor[0];
            long lsb = (long) tensor[1];
            if (inFlight.release(msb, lsb, null) != TransportCounters.NOT_IN_FLIGHT) {
                released++;
                held.computeIfAbsent((String) tensor[2], k -> new int[2])[0]++;
                report.freed(msb, lsb, TensorFates.Fate.CONSUMER_DIED, (String) tensor[2]);
            }
        }
        for (Map.Entry<UUID, String> e : consumerOf.entrySet()) { // spill files
            if (dead.contains(e.getValue()) && consumerOf.remove(e.getKey(), e.getValue()) && inFlight.release(e.getKey())) {
                released++;
                held.computeIfAbsent(e.getValue(), k -> new int[2])[0]++;
                report.freed(e.getKey().getMostSignificantBits(), e.getKey().getLeastSignificantBits(),
                    TensorFates.Fate.CONSUMER_DIED, e.getValue());
            }
        }
        List<UUID> lastShares = fanOut.dropDead(key -> !dead.contains(key), (uuid, consumer) -> {
            held.computeIfAbsent(consumer, k -> new int[2])[1]++;
            report.freed(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), TensorFates.Fate.SHARE_LOST,
                consumer);
        });
        for (UUID uuid : lastShares) { // the dead consumers' shares went; the last share frees
            if (inFlight.release(uuid)) {
                released++;
                report.freed(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(),
                    TensorFates.Fate.CONSUMER_DIED, null);
            }
        }
        counters.deadConsumerReclaimed(released);
        // One warning per dead consumer incarnation (an incident), however many checks find more of its tensors.
        held.forEach((consumer, counts) -> {
            if (consumer.endsWith(NEVER_REACHED)) {
                LOG.warn("consumer never got its fan-out tensors (no process ran as it when they were sent): consumer={},"
                    + " fanOutSharesReleased={}", consumer.substring(0, consumer.length() - NEVER_REACHED.length()),
                    counts[1]);
            } else if (deadReported.add(consumer)) {
                LOG.warn("consumer died before ACKing, or on another node did not confirm its tensors in time: consumer={},"
                    + " tensorsFreed={}, fanOutSharesReleased={} (a fan-out tensor is freed with its last share; count in"
                    + " deadConsumerReclaims)", consumer, counts[0], counts[1]);
            } else {
                LOG.debug("more of a dead consumer's tensors: consumer={}, tensorsFreed={}, fanOutSharesReleased={}",
                    consumer, counts[0], counts[1]);
            }
        });
        if (deadReported.size() > REPORTED_MAX) {
            deadReported.clear();
        }
        return released;
    }

    // The consumers holding tensors now that the check finds dead, each checked once.
    private Set<String> deadHolders(Predicate<String> check) {
        Set<String> holders = inFlight.holders();
        holders.addAll(consumerOf.values());
        fanOut.pendingConsumers(holders);
        Set<String> dead = new HashSet<>();
        for (String holder : holders) {
            if (holder != null && (holder.endsWith(NEVER_REACHED) || !check.test(holder))) {
                dead.add(holder);
            }
        }
        return dead;
    }
}
