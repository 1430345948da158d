package io.mstar.transport;

import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.lifecycle.Namespace;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.spill.FileTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds the transport that {@code MSTAR_SHM_ARENA} selects. */
public final class TensorTransports {
    private static final Logger LOG = LoggerFactory.getLogger(TensorTransports.class);

    private TensorTransports() {
    }

    /** The transport for this process's environment, without periodic stats logging. */
    public static TensorTransport create(String endpoint, String entity) {
        return create(TransportConfig.fromEnvironment(), endpoint, entity, false);
    }

    /**
     * The transport {@code config.mode()} selects: {@code FILE} the file transport; {@code ARENA} the arena,
     * failing with the reason when it cannot start; {@code AUTO} the arena when it can start, else the
     * file transport with one warning saying why.
     *
     * @param endpoint names the deployment; every process of it passes the same string
     * @param entity   names this process within the deployment (letters, digits, '-')
     * @param logStats log the stats snapshot every {@code MSTAR_SHM_ARENA_STATS_INTERVAL_S}
     */
    public static TensorTransport create(TransportConfig config, String endpoint, String entity, boolean logStats) {
        Namespace namespace = Namespace.of(config.deploymentToken(), endpoint);
        return switch (config.mode()) {
            case FILE -> new FileTransport(Owner.create(config.shmDir(), namespace, entity), config.reclaimInterval());
            case ARENA -> ArenaTransport.open(config, namespace, entity, logStats);
            case AUTO -> {
                try {
                    yield ArenaTransport.open(config, namespace, entity, logStats);
                } catch (MstarTransportException | UnsupportedOperationException | LinkageError e) {
                    LOG.warn("the arena cannot start, using the file transport ({}=AUTO): {}", TransportConfig.ARENA,
                        e.getMessage());
                    yield new FileTransport(Owner.create(config.shmDir(), namespace, entity), config.reclaimInterval());
                }
            }
        };
    }
}
