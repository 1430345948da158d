package io.mstar.transport;

import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.spill.FileTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds the transport that {@value TransportConfig#ARENA} selects. */
public final class TensorTransports {
    private static final Logger LOG = LoggerFactory.getLogger(TensorTransports.class);

    private TensorTransports() {
    }

    /** The transport for this process's environment, without periodic stats logging. */
    public static TensorTransport create(String endpoint, String entity) {
        return create(Deployment.fromEnvironment(endpoint, entity), false);
    }

    /**
     * The transport {@code deployment.config().mode()} selects: {@code FILE} the file transport; {@code ARENA}
     * the arena, failing with the reason when it cannot start; {@code AUTO} the arena when it can start, else
     * the file transport with one warning saying why.
     *
     * @param logStats log the stats snapshot every {@value TransportConfig#STATS_INTERVAL_S}
     */
    public static TensorTransport create(Deployment deployment, boolean logStats) {
        return switch (deployment.config().mode()) {
            case FILE -> FileTransport.open(deployment);
            case ARENA -> ArenaTransport.open(deployment, logStats);
            case AUTO -> {
                try {
                    yield ArenaTransport.open(deployment, logStats);
                } catch (MstarTransportException | UnsupportedOperationException | LinkageError e) {
                    LOG.warn("the arena cannot start, using the file transport ({}=AUTO): {}", TransportConfig.ARENA,
                        e.getMessage());
                    yield FileTransport.open(deployment);
                }
            }
        };
    }
}
