package io.mstar.transport.metrics;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.jmx.TransportMXBean;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Each open transport is in the platform MBean server under its documented name, and only while open. */
class TransportJmxTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void aTransportIsAnMXBeanWhileItIsOpen() throws Exception {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        ObjectName name;
        ObjectName second;
        try (TensorTransport transport = TensorTransports.create(shm.deployment("jmx", "worker-1"), false);
             TensorTransport again = TensorTransports.create(shm.deployment("jmx", "worker-1"), false)) {
            String namespace = shm.deployment("jmx", "worker-1").namespace();
            name = new ObjectName(TransportMXBean.DOMAIN + ":type=TensorTransport,namespace=" + namespace
                + ",entity=worker-1");
            second = new ObjectName(name + ",instance=2");
            long deadline = System.nanoTime() + 10_000_000_000L; // registered moments after the open, in order
            while (!server.isRegistered(second) && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            TensorDescriptor d = transport.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[64]), 64)))
                .getFirst();
            assertEquals(1L, server.getAttribute(name, "TensorsSent"));
            assertEquals(1L, server.getAttribute(name, "InFlight"));
            assertEquals("worker-1", server.getAttribute(name, "Entity"));
            transport.ack(List.of(d.uuid()));
            CompositeData stats = (CompositeData) server.getAttribute(name, "Stats");
            assertEquals(1L, stats.get("acks"));
            assertEquals(1L, ((CompositeData) stats.get("sendToAck")).get("count"));
            assertTrue(server.isRegistered(second), "a second transport of the entity is instance 2");
            assertEquals(0L, server.getAttribute(second, "TensorsSent"));
        }
        assertFalse(server.isRegistered(name), "closed: unregistered");
        assertFalse(server.isRegistered(second));
    }
}
