package io.mstar.transport;

import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;

import java.nio.file.Path;
import java.util.Objects;

/**
 * Where one process of a deployment keeps its files and under which names: the configuration (with the
 * shared-memory directory), the deployment's namespace and this process's entity. Build it once per
 * process and pass it to {@link TensorTransports#create(Deployment, boolean)},
 * {@link TensorTransports#mailbox(Deployment, TensorTransport)} and
 * {@code DescriptorCodec.decode(byte[], Deployment)}: every file name and lock of
 * the process is derived from it, in one place.
 */
public final class Deployment {
    private final TransportConfig config;
    private final Namespace namespace;
    private final String entity;

    private Deployment(TransportConfig config, Namespace namespace, String entity) {
        this.config = Objects.requireNonNull(config, "config");
        this.namespace = namespace;
        this.entity = ShmNames.checkEntity(entity);
    }

    /**
     * @param endpoint names the deployment, with or without {@code ipc://}; every process of it passes the
     *                 same string (with {@value TransportConfig#DEPLOYMENT_TOKEN}, the namespace also
     *                 depends on that token)
     * @param entity   names this process within the deployment: letters, digits, '_', '-' and '.', up to 64
     * @throws IllegalArgumentException when the endpoint is empty or the entity is not a valid name
     */
    public static Deployment of(TransportConfig config, String endpoint, String entity) {
        return new Deployment(config, Namespace.of(config.deploymentToken(), endpoint), entity);
    }

    /** As {@link #of}, with the configuration of this process's environment. */
    public static Deployment fromEnvironment(String endpoint, String entity) {
        return of(TransportConfig.fromEnvironment(), endpoint, entity);
    }

    /** The same deployment, for another entity (a test or a tool that plays several processes). */
    public Deployment withEntity(String otherEntity) {
        return new Deployment(config, namespace, otherEntity);
    }

    /** The same deployment (its namespace and entity) with other knobs. */
    public Deployment withConfig(TransportConfig otherConfig) {
        return new Deployment(otherConfig, namespace, entity);
    }

    public TransportConfig config() {
        return config;
    }

    /** The shared-memory directory ({@value TransportConfig#SHM_DIR}). */
    public Path directory() {
        return config.shmDir();
    }

    /** The namespace: 16 hex digits that prefix every file of this deployment. */
    public String namespace() {
        return namespace.id();
    }

    public String entity() {
        return entity;
    }

    @Override
    public String toString() {
        return "Deployment[dir=" + directory() + ", namespace=" + namespace + ", entity=" + entity + "]";
    }
}
