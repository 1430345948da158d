package io.mstar.transport.arena;

import io.mstar.transport.ConsumerLiveness;
import io.mstar.transport.acks.FanOutAcks;
import io.mstar.transport.metrics.TransportCounters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;

/**
 * Which consumer holds each tensor of one arena transport, and freeing what a dead consumer held: a
 * tensor sent to one consumer goes with it; a fan-out tensor loses that consumer's share and goes with
 * its last share ({@link FanOutAcks}). Once {@link #watch} is called, the consumers are checked every
 * {@value #CHECK_INTERVAL_MS} ms on the transport's {@link Maintenance} thread. Thread-safe.
 */
final class ConsumerWatch implements ConsumerLiveness {
    private static final Logger LOG = LoggerFactory.getLogger(ConsumerWatch.class);
    /** How often consumers with tensors in flight are checked for liveness, once a check is set. */
    static final long CHECK_INTERVAL_MS = 500;
    /** Dead incarnations remembered so that each is reported once; beyond this the memory starts again. */
    private static final int REPORTED_MAX = 4096;

    private final InFlightTensors inFlight;
    private final FanOutAcks fanOut;
    private final TransportCounters counters;
    private final Maintenance maintenance;
    private final Map<UUID, String> consumerOf = new ConcurrentHashMap<>();
    private final Set<String> deadReported = ConcurrentHashMap.newKeySet();
    private volatile Predicate<String> alive;

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
            if (!fanOut.contains(uuid) && inFlight.contains(uuid)) {
                consumerOf.put(uuid, consumer);
            }
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
        if (check == null || (consumerOf.isEmpty() && fanOut.isEmpty())) {
            return 0;
        }
        Map<String, Boolean> verdicts = new HashMap<>();
        Predicate<String> aliveOnce = key -> verdicts.computeIfAbsent(key, check::test);
        int released = 0;
        for (Map.Entry<UUID, String> e : consumerOf.entrySet()) {
            if (!aliveOnce.test(e.getValue()) && consumerOf.remove(e.getKey(), e.getValue()) && inFlight.release(e.getKey())) {
                released++;
            }
        }
        for (UUID uuid : fanOut.dropDead(aliveOnce)) { // the dead consumers' shares go; the last share frees
            if (inFlight.release(uuid)) {
                released++;
            }
        }
        counters.deadConsumerReclaimed(released);
        // One warning per dead consumer incarnation (an incident), however many checks find more of its tensors.
        verdicts.forEach((consumer, live) -> {
            if (!live && deadReported.add(consumer)) {
                LOG.warn("consumer died before ACKing: consumer={}; what only it held is freed, its share of fan-out"
                    + " tensors released (count in deadConsumerReclaims)", consumer);
            }
        });
        if (deadReported.size() > REPORTED_MAX) {
            deadReported.clear();
        }
        return released;
    }
}
