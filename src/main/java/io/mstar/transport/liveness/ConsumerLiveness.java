package io.mstar.transport.liveness;

import java.util.Collection;
import java.util.List;
import java.util.UUID;
import java.util.function.Predicate;

/**
 * A producer-side transport that frees what it sent to a consumer that died before ACKing (the arena
 * does; ask with {@code transport.capability(ConsumerLiveness.class)}). The built-in mailbox, attached with
 * {@code TensorTransports.mailbox(deployment, transport)}, calls these methods itself; an application
 * that carries descriptors on its own channel calls them to get the same behaviour.
 */
public interface ConsumerLiveness {
    /** These tensors went to {@code consumer}: free them if it dies before ACKing. */
    void sentTo(String consumer, Collection<UUID> uuids);

    /** As {@link #sentTo(String, Collection)}, for one tensor by its uuid's halves. */
    default void sentTo(String consumer, long uuidMsb, long uuidLsb) {
        sentTo(consumer, List.of(new UUID(uuidMsb, uuidLsb)));
    }

    /**
     * These tensors could not be handed to {@code consumer} (no process runs as it): its share of each fan-out
     * tensor goes at the next check, as a dead consumer's does; a tensor sent to it alone stays the caller's
     * (send it again, or free it with an ACK).
     */
    void neverReached(String consumer, Collection<UUID> uuids);

    /**
     * How to tell whether a consumer is alive. Once set, the consumers that have tensors in flight are
     * checked about every half second from a daemon thread; the predicate must not throw.
     */
    void watch(Predicate<String> alive);
}
