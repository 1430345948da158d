package io.mstar.transport.micrometer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TransportMetricsTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void theBinderShowsCountersGaugesAndTheSendToAckTimer() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        Deployment worker = shm.deployment("m", "worker");
        try (TensorTransport transport = TensorTransports.create(worker, false)) {
            for (int i = 0; i < 3; i++) {
                TensorDescriptor d = transport.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[100]),
                    100))).getFirst();
                transport.ack(List.of(d.uuid()));
            }
            transport.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[100]), 100)));
            new TransportMetrics(transport, worker).bindTo(registry);
            assertEquals(4, registry.get("mstar.transport.tensors.sent").tag("entity", "worker").functionCounter().count());
            assertEquals(400, registry.get("mstar.transport.bytes.sent").functionCounter().count());
            assertEquals(1, registry.get("mstar.transport.in.flight").gauge().value());
            assertEquals(3, registry.get("mstar.transport.send.to.ack").functionTimer().count());
            double p99 = registry.get("mstar.transport.send.to.ack.percentile").tag("phi", "0.99").timeGauge()
                .value(TimeUnit.NANOSECONDS);
            double max = registry.get("mstar.transport.send.to.ack.percentile").tag("phi", "1").timeGauge()
                .value(TimeUnit.NANOSECONDS);
            assertTrue(p99 > 0 && p99 <= max, p99 + " " + max);
        }
    }

    @Test
    void theMetersKeepCountingAfterTheBinderIsDroppedAndCollected() throws InterruptedException {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (TensorEndpoint endpoint = TensorEndpoint.open(shm.deployment("m", "worker"))) {
            endpoint.transport().send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[100]), 100)));
            new TransportMetrics(endpoint).bindTo(registry); // as a user binds it: nobody keeps the binder
            for (int i = 0; i < 3; i++) {
                System.gc(); // Micrometer holds a meter's state object weakly
                Thread.sleep(20);
            }
            assertEquals(1, registry.get("mstar.transport.tensors.sent").functionCounter().count());
            assertEquals(1, registry.get("mstar.transport.in.flight").gauge().value());
            assertEquals(0, registry.get("mstar.transport.send.to.ack").functionTimer().count());
        }
    }
}
