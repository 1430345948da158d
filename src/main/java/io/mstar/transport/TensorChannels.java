package io.mstar.transport;

import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.remote.RoutedMailbox;

/** Builds the built-in channel. */
public final class TensorChannels {
    private TensorChannels() {
    }

    /**
     * Creates this entity's shared-memory mailbox in the deployment's directory; with
     * {@code MSTAR_REMOTE_*} set, entities on other nodes are reached through it too (over Aeron UDP). Needs the
     * JVM flag {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED}.
     *
     * @throws EntityInUseException   when a live process already runs as this entity
     * @throws ConfigurationException when the cross-node path is configured but Aeron is not on the path
     */
    public static TensorChannel mailbox(Deployment deployment) {
        return open(deployment, null);
    }

    /**
     * As {@link #mailbox(Deployment)}, attached to this entity's transport: when the transport has
     * {@link TensorTransport#consumerLiveness()}, it learns which consumer each descriptor batch went to and
     * frees the tensors of a consumer that dies before ACKing them (checked every half second), or, on another
     * node, that did not confirm them within {@code MSTAR_REMOTE_TIMEOUT_S}.
     */
    public static TensorChannel mailbox(Deployment deployment, TensorTransport transport) {
        return open(deployment, transport.consumerLiveness().orElse(null));
    }

    // The routed mailbox only when the cross-node path is configured: without it, Aeron need not be there.
    private static TensorChannel open(Deployment deployment, ConsumerLiveness producer) {
        ShmMailbox local = ShmMailbox.open(deployment);
        if (!deployment.config().remote().enabled()) {
            if (producer != null) {
                local.attach(producer);
            }
            return local;
        }
        boolean ok = false;
        try {
            RoutedMailbox routed = RoutedMailbox.open(local, deployment);
            if (producer != null) {
                routed.attach(producer);
            }
            ok = true;
            return routed;
        } catch (NoClassDefFoundError e) {
            throw new ConfigurationException("the cross-node path (" + RemoteConfig.ENTITIES + ", "
                + RemoteConfig.LISTEN + ") needs io.aeron:aeron-client and io.aeron:aeron-driver 1.49.0 next to this"
                + " library (never aeron-all, whose older Agrona clashes with this library's); missing: " + e.getMessage());
        } finally {
            if (!ok) {
                local.close();
            }
        }
    }
}
