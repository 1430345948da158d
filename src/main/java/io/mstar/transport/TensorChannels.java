package io.mstar.transport;

import io.mstar.transport.channel.ShmMailbox;

/** Builds the built-in channel. */
public final class TensorChannels {
    private TensorChannels() {
    }

    /**
     * Creates this entity's shared-memory mailbox in the deployment's directory. Needs the JVM flag
     * {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED}.
     *
     * @throws EntityInUseException when a live process already runs as this entity
     */
    public static TensorChannel mailbox(Deployment deployment) {
        return ShmMailbox.open(deployment);
    }

    /**
     * As {@link #mailbox(Deployment)}, attached to this entity's transport: when the transport has
     * {@link TensorTransport#consumerLiveness()}, it learns which consumer each descriptor batch went to and
     * frees the tensors of a consumer that dies before ACKing them (checked every half second).
     */
    public static TensorChannel mailbox(Deployment deployment, TensorTransport transport) {
        ShmMailbox mailbox = ShmMailbox.open(deployment);
        transport.consumerLiveness().ifPresent(mailbox::attach);
        return mailbox;
    }
}
