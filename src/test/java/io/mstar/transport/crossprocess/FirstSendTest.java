package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A send to a consumer's node that does not listen yet returns at once (its tensor waits in the link's queue)
 * and is delivered when that node starts within the timeout: the consumer is started only after the send
 * returned, so a send that waited for its connection would time out instead. One to a node that never starts
 * fails once, at its timeout, saying since when it is unreachable.
 */
class FirstSendTest {
    @Test
    void aSendBeforeTheConsumersNodeListensReturnsAndIsDeliveredWhenItStarts() throws Exception {
        Path work = Files.createTempDirectory("mstar-first-send-");
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S,
                 "30"), "pipe", "prefill"));
             Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(4096, 64);
            RemoteNode.fill(data, 0);
            Delivery delivery = producer.send("decode", "s0", Tensor.of(DType.U8, data, data.byteSize()));
            assertEquals(Delivery.Status.PENDING, delivery.status(), "decided before its node started: "
                + delivery.detail());
            Path received = work.resolve("received");
            Path stop = work.resolve("stop");
            ChildJvm consumer = ChildJvm.start(true, nodes.env(false), RemoteNode.class, "consumer",
                received.toString(), stop.toString());
            assertEquals(Delivery.Status.DELIVERED, delivery.await(Duration.ofSeconds(60)), delivery.detail());
            Files.createFile(stop);
            assertEquals(0, consumer.await(60), consumer.output());
            assertEquals(List.of("0"), Files.readAllLines(received));
            consumer.deleteLog();
        } finally {
            ShmTestDir.deleteTree(work);
        }
    }

    @Test
    void aSendToANodeThatNeverStartsFailsOnceAtItsTimeout() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S,
                 "1"), "pipe", "prefill"));
             Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(4096, 64);
            Delivery delivery = producer.send("decode", "s0", Tensor.of(DType.U8, data, data.byteSize()));
            assertEquals(Delivery.Status.FAILED, delivery.await(Duration.ofSeconds(30)));
            assertEquals(Delivery.Failure.REMOTE_TIMEOUT, delivery.failure(), delivery.detail());
            assertTrue(delivery.detail().contains("unreachable since"), delivery.detail());
            assertTrue(!delivery.detail().contains("null"), delivery.detail());
        }
    }
}
