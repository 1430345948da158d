package io.mstar.transport.arena;

import io.mstar.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.function.Predicate;

/**
 * Warns once when a tensor has waited longer than {@value TransportConfig#STALL_WARN_S} for its ACK while its
 * consumer lives: its ACK waits in this process's mailbox with no thread reading it, or the consumer stopped
 * handling. A dead consumer's tensors are {@link ConsumerWatch}'s. One WARN per stall: the next comes once no
 * tensor waits that long any more and one does again. Checked every second on the transport's
 * {@link Maintenance} thread.
 */
final class StallWatch {
    private static final Logger LOG = LoggerFactory.getLogger(StallWatch.class);
    static final long CHECK_INTERVAL_MS = 1000;

    private final InFlightTensors inFlight;
    private final Predicate<String> alive;
    private final long boundNs;
    private final String entity;
    private boolean warned; // for the stall going on; Maintenance's thread only

    StallWatch(InFlightTensors inFlight, Predicate<String> alive, Duration bound, String entity) {
        this.inFlight = inFlight;
        this.alive = alive;
        this.boundNs = bound.toNanos();
        this.entity = entity;
    }

    /** Looks at the tensor in flight longest; returns whether it warned now. */
    boolean check() {
        InFlightTensors.Oldest oldest = inFlight.oldest();
        long ageNs = oldest == null ? 0 : System.nanoTime() - oldest.sentAtNs();
        if (ageNs < boundNs) {
            warned = false;
            return false;
        }
        if (warned || oldest.holder() == null || !alive.test(oldest.holder())) {
            return false; // warned already, or not yet handed to a consumer, or its consumer is dead (freed elsewhere)
        }
        warned = true;
        LOG.warn("a tensor waits for its ACK while its consumer lives: entity={}, uuid={}, consumer={}, waitedMs={},"
            + " inFlight={} ({}={} s). If the consumer handled it, its ACK waits unread in this process's mailbox"
            + " (mstar-shm stats shows unreadAcks): a thread of this endpoint must read it (its ACK thread does unless"
            + " the application polls); else the consumer stopped handling", entity, oldest.uuid(), oldest.holder(),
            ageNs / 1_000_000, inFlight.count(), TransportConfig.STALL_WARN_S, boundNs / 1_000_000_000.0);
        return true;
    }
}
