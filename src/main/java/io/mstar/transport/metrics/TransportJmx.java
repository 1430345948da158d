package io.mstar.transport.metrics;

import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportStats;
import io.mstar.transport.jmx.TransportMXBean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import javax.management.InstanceAlreadyExistsException;
import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import java.lang.management.ManagementFactory;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * Registers each transport's {@link TransportMXBean} while it is open. The registration runs on a thread of its
 * own, one transport after the other in the order they opened: the platform MBean server's first use costs a few
 * hundred milliseconds (it registers every platform bean), which opening a transport does not wait for. The bean
 * appears moments after the open; a close waits for its registration, then unregisters it.
 */
public final class TransportJmx {
    private static final Logger LOG = LoggerFactory.getLogger(TransportJmx.class);
    private static final int MAX_INSTANCES = 1000;
    private static final long REGISTRATION_WAIT_S = 10;
    private static final ExecutorService REGISTRAR = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "mstar-jmx");
        t.setDaemon(true);
        return t;
    });

    private TransportJmx() {
    }

    /**
     * Registers the transport's bean, soon; the name it got comes from the future (null when JMX refused it).
     * {@code sections}: what the transport publishes beside its stats, by name ("remote": {@link RemoteStats}).
     */
    public static Future<ObjectName> register(TensorTransport transport, String namespace, String entity,
                                              Function<String, Record> sections) {
        return REGISTRAR.submit(() -> registerNow(transport, namespace, entity, sections));
    }

    private static ObjectName registerNow(TensorTransport transport, String namespace, String entity,
                                          Function<String, Record> sections) {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        String base = TransportMXBean.DOMAIN + ":type=TensorTransport,namespace=" + namespace + ",entity=" + entity;
        for (int instance = 1; instance <= MAX_INSTANCES; instance++) {
            try {
                ObjectName name = new ObjectName(instance == 1 ? base : base + ",instance=" + instance);
                server.registerMBean(new Bean(transport, namespace, entity, sections), name);
                return name;
            } catch (InstanceAlreadyExistsException e) {
                // another transport of this entity in this process: the next instance number
            } catch (JMException | RuntimeException e) {
                LOG.warn("transport not registered with JMX: {}: {}", base, e.toString());
                return null;
            }
        }
        LOG.warn("transport not registered with JMX: {} open {} times in this process", base, MAX_INSTANCES);
        return null;
    }

    /** Unregisters what {@link #register} registered, once its registration is done (null: nothing). */
    public static void unregister(Future<ObjectName> registration) {
        if (registration == null) {
            return;
        }
        ObjectName name;
        try {
            name = registration.get(REGISTRATION_WAIT_S, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            registration.cancel(false);
            return;
        } catch (ExecutionException | TimeoutException | CancellationException e) {
            registration.cancel(false);
            return;
        }
        if (name == null) {
            return;
        }
        try {
            ManagementFactory.getPlatformMBeanServer().unregisterMBean(name);
        } catch (JMException e) {
            LOG.debug("transport's JMX bean already gone: {}", name);
        }
    }

    private record Bean(TensorTransport transport, String namespace, String entity, Function<String, Record> sections)
        implements TransportMXBean {
        @Override
        public TransportStats getStats() {
            return transport.statsSummary();
        }

        @Override
        public RemoteStats getRemote() {
            return sections.apply("remote") instanceof RemoteStats remote ? remote : null;
        }

        @Override
        public String getEntity() {
            return entity;
        }

        @Override
        public String getNamespace() {
            return namespace;
        }

        @Override
        public long getTensorsSent() {
            return getStats().tensorsSent();
        }

        @Override
        public long getBytesSent() {
            return getStats().bytesSent();
        }

        @Override
        public long getInFlight() {
            return getStats().inFlight();
        }

        @Override
        public long getSpills() {
            return getStats().spills();
        }

        @Override
        public long getAcks() {
            return getStats().acks();
        }

        @Override
        public long getRefusals() {
            return getStats().refusals();
        }

        @Override
        public long getArenaUsedBytes() {
            TransportStats stats = getStats();
            return stats.arena() == null ? 0 : stats.arena().usedBytes();
        }

        @Override
        public long getSendToAckP99Ns() {
            return getStats().sendToAck().p99Ns();
        }

        @Override
        public long getReceiveToReleaseP99Ns() {
            return getStats().receiveToRelease().p99Ns();
        }
    }
}
