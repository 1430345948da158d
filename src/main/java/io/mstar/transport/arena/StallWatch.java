package io.mstar.transport.arena;

import io.mstar.transport.TransportConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.time.Duration;
import java.util.function.Predicate;
import java.util.function.Supplier;

/**
 * Warns once when a tensor has waited longer than {@value TransportConfig#STALL_WARN_S} for its ACK while its
 * consumer lives, with what the endpoint above says holds it (its ACKs unread or not, a handler running, a
 * listener being told). A dead consumer's tensors are {@link ConsumerWatch}'s. One WARN per stall: the next comes once no
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
    private final Supplier<String> holds;
    private boolean warned; // for the stall going on; Maintenance's thread only

    /** @param holds what this process's endpoint says holds the outcomes now */
    StallWatch(InFlightTensors inFlight, Predicate<String> alive, Duration bound, String entity, Supplier<String> holds) {
        this.inFlight = inFlight;
        this.holds = holds;
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
            + " inFlight={} ({}={} s); here: {}", entity, oldest.uuid(), oldest.holder(), ageNs / 1_000_000,
            inFlight.count(), TransportConfig.STALL_WARN_S, boundNs / 1_000_000_000.0, holds.get());
        return true;
    }
}
