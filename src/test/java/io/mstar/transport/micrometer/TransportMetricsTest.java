package io.mstar.transport.micrometer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
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

    /** Bound before any traffic, the first read after it counts what was sent meanwhile (not the zeros at binding). */
    @Test
    void theFirstReadAfterBindingIsCurrent() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        Deployment worker = shm.deployment("m", "worker");
        try (TensorTransport transport = TensorTransports.create(worker, false)) {
            new TransportMetrics(transport, worker).bindTo(registry);
            for (int i = 0; i < 100; i++) {
                TensorDescriptor d = transport.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[8]),
                    8))).getFirst();
                transport.ack(List.of(d.uuid()));
            }
            assertEquals(100, registry.get("mstar.transport.tensors.sent").functionCounter().count());
            assertEquals(100, registry.get("mstar.transport.acks").functionCounter().count());
        }
    }

    /** An endpoint on the cross-node path also shows the link's counters and its open connections. */
    @Test
    void anEndpointAcrossNodesShowsTheRemoteMeters() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             TensorEndpoint consumer = TensorEndpoint.open(Deployment.of(nodes.config(false), "m", "decode"));
             TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true), "m", "prefill"))) {
            SimpleMeterRegistry sending = new SimpleMeterRegistry();
            SimpleMeterRegistry receiving = new SimpleMeterRegistry();
            new TransportMetrics(producer).bindTo(sending);
            new TransportMetrics(consumer).bindTo(receiving);
            Delivery delivery = producer.send("decode", "r", Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096));
            assertEquals(1, consumer.receive(tensor -> { }, Duration.ofSeconds(30)));
            assertEquals(Delivery.Status.DELIVERED, delivery.await(Duration.ofSeconds(30)));
            assertEquals(1, sending.get("mstar.remote.tensors.sent").functionCounter().count());
            assertEquals(1, sending.get("mstar.remote.landed").functionCounter().count());
            assertEquals(4096, receiving.get("mstar.remote.bytes.received").functionCounter().count());
            assertEquals(1, receiving.get("mstar.remote.connections").gauge().value());
            assertEquals(0, receiving.get("mstar.remote.rejected.connections").functionCounter().count());
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
