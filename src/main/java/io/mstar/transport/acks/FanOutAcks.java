package io.mstar.transport.acks;

import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.metrics.TransportCounters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * Tensors sent to named consumers (fan-out), each waiting for all of them: a tensor's slot may be freed
 * only when every named consumer has ACKed it or is dead. Per tensor, the consumers' names, a bit per
 * consumer still to ACK (at most {@value #MAX_CONSUMERS}), and the incarnation each was delivered to (its
 * liveness key, {@code entity@incarnation}, from the mailbox). A share belongs to an incarnation, never to a
 * bare entity name: until its descriptor reached one, the share is the sending thread's to settle (delivered,
 * or {@link #frees refused}) and no liveness check judges it, so a check racing a restart cannot release a
 * share that the new incarnation is about to read. A repeated ACK from the same consumer counts once; an ACK
 * from a consumer that was not named is refused. Thread-safe; a tensor sent to one consumer never enters it,
 * so the single-consumer path costs one {@code isEmpty()}.
 */
public final class FanOutAcks {
    private static final Logger LOG = LoggerFactory.getLogger(FanOutAcks.class);
    /** Most consumers one tensor may name. */
    public static final int MAX_CONSUMERS = 64;
    /**
     * Test-only seam: {@code -Dmstar.test.fanOutFirstAckFrees=true} frees a tensor on its first ACK, as if
     * nobody counted, so a test can show that the counting is what keeps slow consumers' bytes intact.
     */
    static final boolean FIRST_ACK_FREES = Boolean.getBoolean("mstar.test.fanOutFirstAckFrees");
    /**
     * Test-only seam: {@code -Dmstar.test.bareShareKeys=true} keys a share by its entity name until it is
     * delivered, as this class once did, so a fault campaign can show that incarnation keys are what keep a
     * restarted consumer's tensors intact.
     */
    static final boolean BARE_SHARE_KEYS = Boolean.getBoolean("mstar.test.bareShareKeys");

    /** What one consumer's ACK did. */
    enum Outcome {
        /** the last share: free the tensor now */
        LAST,
        /** counted; other consumers still read it */
        PENDING,
        /** this consumer had ACKed it already */
        REPEATED,
        /** this consumer was not named for it */
        NOT_NAMED,
        /** not a fan-out tensor in flight */
        UNKNOWN
    }

    private static final class Entry {
        final String[] consumers;
        final String[] keys; // liveness key (entity@incarnation) per consumer once delivered, else null
        long pending;

        Entry(String[] consumers) {
            this.consumers = consumers;
            this.keys = BARE_SHARE_KEYS ? consumers.clone() : new String[consumers.length];
            this.pending = consumers.length == MAX_CONSUMERS ? -1L : (1L << consumers.length) - 1;
        }

        int indexOf(String consumer) {
            for (int i = 0; i < consumers.length; i++) {
                if (consumers[i].equals(consumer)) {
                    return i;
                }
            }
            return -1;
        }
    }

    private final Map<UUID, Entry> entries = new ConcurrentHashMap<>();
    private final TransportCounters counters;

    /** @param counters where ACKs that do not count are counted ({@code ignoredAcks}) */
    public FanOutAcks(TransportCounters counters) {
        this.counters = counters;
    }

    /**
     * Checks a send's consumer list: 1 to {@value #MAX_CONSUMERS} distinct names.
     *
     * @throws IllegalArgumentException naming what is wrong
     */
    private static String[] checkConsumers(List<String> consumers) {
        String[] names = consumers.toArray(String[]::new);
        if (names.length == 0 || names.length > MAX_CONSUMERS || consumers.stream().distinct().count() != names.length) {
            throw new IllegalArgumentException("a fan-out send names 1 to " + MAX_CONSUMERS + " distinct consumers:"
                + " consumers=" + consumers);
        }
        return names;
    }

    /**
     * A fan-out send: checks {@code consumers}, sends through {@code send}, and registers every tensor
     * before its descriptor can leave, so no ACK can come first.
     */
    public List<TensorDescriptor> send(List<String> consumers, Supplier<List<TensorDescriptor>> send) {
        String[] names = checkConsumers(consumers);
        List<TensorDescriptor> sent = send.get();
        sent.forEach(d -> expect(d.uuid(), names));
        return sent;
    }

    /** Registers a tensor before its descriptor leaves, so no ACK can come first. */
    private void expect(UUID uuid, String[] consumers) {
        entries.put(uuid, new Entry(consumers));
    }

    public boolean isEmpty() {
        return entries.isEmpty();
    }

    public boolean contains(UUID uuid) {
        return entries.containsKey(uuid);
    }

    /**
     * Whether {@code consumer}'s ACK frees the tensor now: yes for a tensor sent to one consumer and for the
     * last share of a fan-out tensor; no while other consumers still read it, and no (counted in
     * {@code ignoredAcks}) for a repeat or an ACK from a consumer that was not named.
     */
    public boolean frees(UUID uuid, String consumer) {
        if (entries.isEmpty()) {
            return true;
        }
        Outcome outcome = ack(uuid, consumer);
        if (outcome == Outcome.REPEATED || outcome == Outcome.NOT_NAMED) {
            counters.ignoredAck();
            LOG.debug("ACK ignored ({}): consumer={}, uuid={}", outcome, consumer, uuid);
            return false;
        }
        return outcome != Outcome.PENDING;
    }

    /**
     * Whether an ACK that does not say which consumer sent it frees the tensor: not for a fan-out tensor
     * (counted in {@code ignoredAcks}). Allocates nothing while no fan-out tensor is in flight.
     */
    public boolean freesUnattributed(long uuidMsb, long uuidLsb) {
        if (entries.isEmpty() || !entries.containsKey(new UUID(uuidMsb, uuidLsb))) {
            return true;
        }
        counters.ignoredAck();
        return false;
    }

    /** Counts {@code consumer}'s ACK; on {@link Outcome#LAST} the entry is gone and the caller frees the tensor. */
    Outcome ack(UUID uuid, String consumer) {
        Entry e = entries.get(uuid);
        if (e == null) {
            return Outcome.UNKNOWN;
        }
        synchronized (e) {
            int i = e.indexOf(consumer);
            if (i < 0) {
                return Outcome.NOT_NAMED;
            }
            long bit = 1L << i;
            if ((e.pending & bit) == 0) {
                return Outcome.REPEATED;
            }
            e.pending = FIRST_ACK_FREES ? 0 : e.pending & ~bit;
            return e.pending == 0 && entries.remove(uuid, e) ? Outcome.LAST : Outcome.PENDING;
        }
    }

    /** The incarnation of {@code entity} the tensor was delivered to, as the liveness key to check. */
    public void delivered(UUID uuid, String entity, String key) {
        Entry e = entries.get(uuid);
        if (e != null) {
            synchronized (e) {
                int i = e.indexOf(entity);
                if (i >= 0) {
                    e.keys[i] = key;
                }
            }
        }
    }

    /** Forgets a tensor (freed by the TTL or released otherwise). */
    public void remove(UUID uuid) {
        entries.remove(uuid);
    }

    /**
     * Drops the shares of incarnations that {@code alive} says are dead; returns the tensors whose last share
     * went, which the caller frees; {@code lost} hears of each share dropped. {@code alive} is asked per
     * pending share delivered to an incarnation (a dead incarnation stays dead, so the caller may cache its
     * verdicts); a share not delivered yet is never asked about.
     */
    public List<UUID> dropDead(Predicate<String> alive, BiConsumer<UUID, String> lost) {
        List<UUID> freed = new ArrayList<>();
        for (Map.Entry<UUID, Entry> me : entries.entrySet()) {
            Entry e = me.getValue();
            synchronized (e) {
                for (int i = 0; i < e.consumers.length; i++) {
                    if ((e.pending & (1L << i)) != 0 && e.keys[i] != null && !alive.test(e.keys[i])) {
                        e.pending &= ~(1L << i);
                        lost.accept(me.getKey(), e.keys[i]);
                    }
                }
                if (e.pending == 0 && entries.remove(me.getKey(), e)) {
                    freed.add(me.getKey());
                }
            }
        }
        return freed;
    }

    /** Adds the liveness key of every incarnation that still holds a share of some tensor delivered to it. */
    public void pendingConsumers(Set<String> into) {
        for (Entry e : entries.values()) {
            synchronized (e) {
                for (int i = 0; i < e.consumers.length; i++) {
                    if ((e.pending & (1L << i)) != 0 && e.keys[i] != null) {
                        into.add(e.keys[i]);
                    }
                }
            }
        }
    }

    /** Tensors that some but not all of their consumers have ACKed. */
    public int partiallyAcked() {
        int n = 0;
        for (Entry e : entries.values()) {
            synchronized (e) {
                long all = e.consumers.length == MAX_CONSUMERS ? -1L : (1L << e.consumers.length) - 1;
                n += e.pending != all ? 1 : 0;
            }
        }
        return n;
    }
}
