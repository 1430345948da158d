package io.mstar.transport.docs;

import io.micrometer.core.instrument.MeterRegistry;
import io.mstar.transport.LatencyStats;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.jmx.TransportMXBean;
import io.mstar.transport.micrometer.TransportMetrics;

import javax.management.JMX;
import javax.management.MBeanServer;
import javax.management.MalformedObjectNameException;
import javax.management.ObjectName;
import java.lang.management.ManagementFactory;

/** The examples of docs/metrics.md, compiled by the build (UserGuideTest checks the page shows them). */
final class MetricsExamples {
    private MetricsExamples() {
    }

    static void micrometer(TensorEndpoint endpoint, MeterRegistry registry) {
        // tag::micrometer[]
        new TransportMetrics(endpoint).bindTo(registry);    // tagged with the endpoint's entity
        // end::micrometer[]
    }

    static long jmx(String namespace) throws MalformedObjectNameException {
        // tag::jmx[]
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        ObjectName name = new ObjectName("io.mstar.transport:type=TensorTransport,namespace=" + namespace
            + ",entity=vision-encoder-0");
        TransportMXBean transport = JMX.newMXBeanProxy(server, name, TransportMXBean.class);
        long p99 = transport.getSendToAckP99Ns();
        // end::jmx[]
        return p99;
    }

    static String snapshot(TensorTransport transport) {
        // tag::snapshot[]
        LatencyStats sendToAck = transport.statsSummary().sendToAck();
        String line = "p50=" + sendToAck.p50Ns() + " ns p99=" + sendToAck.p99Ns() + " ns max=" + sendToAck.maxNs() + " ns";
        // end::snapshot[]
        return line;
    }
}
