package io.mstar.transport;

import java.util.ServiceLoader;

/**
 * Builds the parts underneath {@link TensorEndpoint}, for an application that carries descriptors on a
 * channel of its own (a transport alone) or drives the mailbox itself.
 */
public final class TensorTransports {
    private TensorTransports() {
    }

    /** The transport for this process's environment, without periodic stats logging. */
    public static TensorTransport create(String endpoint, String entity) {
        return create(Deployment.fromEnvironment(endpoint, entity), false);
    }

    /**
     * The transport {@code deployment.config().mode()} selects: {@code FILE} the file transport; {@code ARENA}
     * the arena, failing with the reason when it cannot start; {@code AUTO} the arena when it can start, else
     * the file transport with one warning saying why. The arena makes its first segment on the first send or
     * claim.
     *
     * @param logStats log the stats snapshot every {@value TransportConfig#STATS_INTERVAL_S}
     */
    public static TensorTransport create(Deployment deployment, boolean logStats) {
        return assembly().transport(deployment, logStats);
    }

    /**
     * Creates this entity's shared-memory mailbox in the deployment's directory; with {@code MSTAR_REMOTE_*}
     * set, entities on other nodes are reached through it too. Needs the JVM flag
     * {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED}.
     *
     * @throws io.mstar.transport.exceptions.EntityInUseException   when a live process already runs as this entity
     * @throws io.mstar.transport.exceptions.ConfigurationException when the cross-node path is configured but its
     *                                                              libraries are missing, or the flag is
     */
    public static TensorChannel mailbox(Deployment deployment) {
        return assembly().mailbox(deployment, null);
    }

    /**
     * As {@link #mailbox(Deployment)}, attached to this entity's transport: the transport learns which consumer
     * each descriptor batch went to and frees the tensors of a consumer that dies before ACKing them (checked
     * every half second), or, on another node, that did not confirm them within {@code MSTAR_REMOTE_TIMEOUT_S}.
     */
    public static TensorChannel mailbox(Deployment deployment, TensorTransport transport) {
        return assembly().mailbox(deployment, transport);
    }

    static Assembly assembly() {
        return Holder.ASSEMBLY;
    }

    /**
     * How this library puts its implementations together behind the API: the API names none of them, so
     * that they may use the API's types without a cycle. One implementation ships in the library, found with
     * {@link ServiceLoader}; applications do not implement it.
     */
    public interface Assembly {
        TensorTransport transport(Deployment deployment, boolean logStats);

        /** @param transport the transport to attach, or null */
        TensorChannel mailbox(Deployment deployment, TensorTransport transport);

        /** @param listener told each tensor's outcome, or null */
        TensorEndpoint endpoint(Deployment deployment, DeliveryListener listener);
    }

    private static final class Holder {
        static final Assembly ASSEMBLY = ServiceLoader.load(Assembly.class, Assembly.class.getClassLoader()).findFirst()
            .orElseThrow(() -> new IllegalStateException("no " + Assembly.class.getName() + " on the path: the"
                + " mstar-transport jar is incomplete (its META-INF/services entry is missing)"));
    }
}
