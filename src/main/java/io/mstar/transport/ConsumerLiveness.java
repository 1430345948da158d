package io.mstar.transport;

import java.util.Collection;
import java.util.UUID;
import java.util.function.Predicate;

/**
 * A producer-side transport that frees what it sent to a consumer that died before ACKing (the arena
 * does; ask with {@link TensorTransport#consumerLiveness()}). The built-in mailbox, attached with
 * {@link TensorChannels#mailbox(Deployment, TensorTransport)}, calls both methods itself; an application
 * that carries descriptors on its own channel calls them to get the same behaviour.
 */
public interface ConsumerLiveness {
    /** These tensors went to {@code consumer}: free them if it dies before ACKing. */
    void sentTo(String consumer, Collection<UUID> uuids);

    /**
     * How to tell whether a consumer is alive. Once set, the consumers that have tensors in flight are
     * checked about every half second from a daemon thread; the predicate must not throw.
     */
    void watch(Predicate<String> alive);
}
