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
        return ShmMailbox.open(config.shmDir(), Namespace.of(config.deploymentToken(), endpoint), entity);
    }
}
