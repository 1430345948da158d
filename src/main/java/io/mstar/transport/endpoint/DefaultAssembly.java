package io.mstar.transport.endpoint;

import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.MstarTransportException;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.liveness.SlotHolds;
import io.mstar.transport.remote.RoutedMailbox;
import io.mstar.transport.spill.FileTransport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The library's {@link TensorTransports.Assembly}: which transport and which mailbox, and the endpoint over them. */
public final class DefaultAssembly implements TensorTransports.Assembly {
    private static final Logger LOG = LoggerFactory.getLogger(DefaultAssembly.class);

    @Override
    public TensorTransport transport(Deployment deployment, boolean logStats) {
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

    // The routed mailbox only when the cross-node path is configured: without it, Netty need not be there.
    @Override
    public TensorChannel mailbox(Deployment deployment, TensorTransport transport) {
        ConsumerLiveness producer = transport == null ? null : transport.capability(ConsumerLiveness.class).orElse(null);
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
                routed.attach(producer, transport.capability(SlotHolds.class).orElse((msb, lsb) -> SlotHolds.NONE));
            }
            ok = true;
            return routed;
        } catch (NoClassDefFoundError e) {
            throw new ConfigurationException("the cross-node path (" + RemoteConfig.ENTITIES + ", "
                + RemoteConfig.LISTEN + ") needs io.netty:netty-handler 4.2.18.Final next to this library (and"
                + " netty-transport-native-epoll, classifier linux-x86_64, for the native transport); missing: "
                + e.getMessage());
        } finally {
            if (!ok) {
                local.close();
            }
        }
    }

    @Override
    public TensorEndpoint endpoint(Deployment deployment, DeliveryListener listener) {
        TensorTransport transport = transport(deployment, false);
        try {
            return new Endpoint(deployment, transport, mailbox(deployment, transport), listener);
        } catch (RuntimeException | Error e) {
            transport.close();
            throw e;
        }
    }
}
