package io.mstar.transport.metrics;

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

/** Registers each transport's {@link TransportMXBean} while it is open. */
public final class TransportJmx {
    private static final Logger LOG = LoggerFactory.getLogger(TransportJmx.class);
    private static final int MAX_INSTANCES = 1000;

    private TransportJmx() {
    }

    /** Registers the transport's bean; returns its name, or null when JMX refused it (logged, never thrown). */
    public static ObjectName register(TensorTransport transport, String namespace, String entity) {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        String base = TransportMXBean.DOMAIN + ":type=TensorTransport,namespace=" + namespace + ",entity=" + entity;
        for (int instance = 1; instance <= MAX_INSTANCES; instance++) {
            try {
                ObjectName name = new ObjectName(instance == 1 ? base : base + ",instance=" + instance);
                server.registerMBean(new Bean(transport, namespace, entity), name);
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

    /** Unregisters what {@link #register} registered (null: nothing). */
    public static void unregister(ObjectName name) {
        if (name == null) {
            return;
        }
        try {
            ManagementFactory.getPlatformMBeanServer().unregisterMBean(name);
        } catch (JMException e) {
            LOG.debug("transport's JMX bean already gone: {}", name);
        }
    }

    private record Bean(TensorTransport transport, String namespace, String entity) implements TransportMXBean {
        @Override
        public TransportStats getStats() {
            return transport.statsSummary();
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
