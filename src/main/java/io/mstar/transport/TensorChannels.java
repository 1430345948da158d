package io.mstar.transport;

import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.lifecycle.Namespace;

/** Builds the built-in channel. */
public final class TensorChannels {
    private TensorChannels() {
    }

    /**
     * Creates this entity's shared-memory mailbox in {@code config.shmDir()}, under the namespace of
     * {@code endpoint}. Needs the JVM flag {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED}.
     */
    public static TensorChannel mailbox(TransportConfig config, String endpoint, String entity) {
        return ShmMailbox.open(config.shmDir(), Namespace.of(config.deploymentToken(), endpoint), entity,
            config.reclaimInterval());
    }

    /**
     * As {@link #mailbox(TransportConfig, String, String)}, attached to this entity's transport: the
     * transport learns which consumer each descriptor batch went to, and frees the tensors of a consumer
     * that dies before ACKing them (checked every half second).
     */
    public static TensorChannel mailbox(TransportConfig config, String endpoint, String entity, TensorTransport transport) {
        ShmMailbox mailbox = ShmMailbox.open(config.shmDir(), Namespace.of(config.deploymentToken(), endpoint), entity,
            config.reclaimInterval());
        mailbox.attach(transport);
        return mailbox;
    }
}
