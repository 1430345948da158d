package io.mstar.transport.endpoint;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a handler may do besides return: throw an Error, keep then throw, close the endpoint from inside, or run
 * while another thread closes it; and a fan-out whose last share to go is a death. Each tensor handled is told
 * delivered to its producer, each one not handled is told once, and none is lost.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class HandlerEdgesTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private Deployment deployment(String entity) {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2");
        return Deployment.of(TransportConfig.from(env::get), "handler-edges", entity);
    }

    private static Tensor filled(int bytes, int value) {
        return Tensor.of(DType.U8, MemorySegment.ofArray(new byte[bytes]).fill((byte) value), bytes);
    }

    /** Counts the outcomes told, by request id, and fails a test that sees one told twice. */
    private static final class Told implements DeliveryListener {
        final Map<String, String> outcomes = new ConcurrentHashMap<>();
        final AtomicInteger twice = new AtomicInteger();

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            record(requestId, "DELIVERED");
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            record(requestId, failure.name());
        }

        private void record(String requestId, String outcome) {
            if (outcomes.put(requestId, outcome) != null) {
                twice.incrementAndGet();
            }
        }

        boolean awaitCount(int count, long timeoutMs) throws InterruptedException {
            long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
            while (outcomes.size() < count && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            return outcomes.size() >= count;
        }
    }

    /**
     * A receive-only consumer whose handler throws an AssertionError on every 10th tensor, the application catching
     * it and receiving again; a producer posting 4 KiB tensors in windows of 8 and waiting for each window's
     * outcomes. Every outcome is told within 10 s, each DELIVERED: the thrown tensor is ACKed and the rest of its
     * poll is handed to the next poll, and the ACKs the poll gathered are sent. (Before: 2 to 6 of the first 16
     * stayed untold while the consumer lived.)
     */
    @Test
    void aHandlerThatThrowsAnErrorLeavesNoOutcomeUntoldAndTheRestOfItsPollGoesToTheNext() throws Exception {
        int count = 4000;
        int window = 8;
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger handled = new AtomicInteger();
        AtomicInteger thrown = new AtomicInteger();
        CountDownLatch open = new CountDownLatch(1);
        Thread consumer = new Thread(() -> {
            try (TensorEndpoint endpoint = TensorEndpoint.open(deployment("thrower"))) {
                open.countDown();
                while (!stop.get()) {
                    try {
                        endpoint.receive(tensor -> {
                            if (handled.incrementAndGet() % 10 == 0) {
                                throw new AssertionError("every 10th tensor");
                            }
                        }, Duration.ofMillis(20));
                    } catch (AssertionError expected) {
                        thrown.incrementAndGet();
                    }
                }
            }
        }, "thrower");
        consumer.start();
        Told told = new Told();
        try (TensorEndpoint producer = TensorEndpoint.open(deployment("writer"), told)) {
            assertTrue(open.await(30, TimeUnit.SECONDS));
            assertTrue(producer.awaitPeer("thrower", Duration.ofSeconds(30)));
            for (int sent = 0; sent < count; sent += window) {
                for (int i = sent; i < sent + window; i++) {
                    producer.post("thrower", "t" + i, filled(4096, i));
                }
                assertTrue(told.awaitCount(sent + window, 10_000), "after " + (sent + window) + " posts, "
                    + (sent + window - told.outcomes.size()) + " stayed untold for 10 s (handled "
                    + handled.get() + ", thrown " + thrown.get() + ")");
            }
        } finally {
            stop.set(true);
            consumer.join(30_000);
        }
        assertEquals(count, told.outcomes.size());
        assertEquals(0, told.twice.get(), "told twice");
        assertEquals(count, told.outcomes.values().stream().filter("DELIVERED"::equals).count(), "all delivered");
        assertEquals(count, handled.get(), "each handled once");
        assertEquals(count / 10, thrown.get());
    }

    /**
     * A handler that keeps its tensor and then throws: the tensor is ACKed when the kept view closes, not when the
     * handler throws (the producer would reuse the slot under the view, and the view's close send a stray ACK).
     */
    @Test
    void aTensorKeptByAHandlerThatThenThrowsIsAckedOnlyWhenItsViewCloses() throws Exception {
        try (TensorEndpoint producer = TensorEndpoint.open(deployment("writer"));
             TensorEndpoint consumer = TensorEndpoint.open(deployment("reader"))) {
            Delivery delivery = producer.send("reader", "kept", filled(1 << 16, 7));
            List<ReceivedTensor> kept = new ArrayList<>();
            assertEquals(1, consumer.receive(tensor -> {
                kept.add(tensor.keep());
                throw new IllegalStateException("thrown after keep()");
            }, Duration.ofSeconds(10)));
            assertEquals(Delivery.Status.PENDING, delivery.await(Duration.ofMillis(300)), "kept: not ACKed yet");
            kept.getFirst().close();
            assertEquals(Delivery.Status.DELIVERED, delivery.await(Duration.ofSeconds(10)), delivery.toString());
            assertEquals(0, producer.transport().statsSummary().inFlight());
            assertEquals(0, producer.transport().statsSummary().unknownAcks(), "no stray ACK");
            assertEquals(0, producer.transport().statsSummary().refusals(), "no stray refusal");
        }
    }

    /** A consumer that closes its endpoint from inside the handler of a "stop" tensor: the stop tensor is DELIVERED. */
    @Test
    void aHandlerThatClosesItsEndpointHasItsOwnTensorDelivered() throws Exception {
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicReference<Byte> lastByteAfterClose = new AtomicReference<>();
        CountDownLatch open = new CountDownLatch(1);
        Thread consumer = new Thread(() -> {
            try (TensorEndpoint endpoint = TensorEndpoint.open(deployment("stopper"))) {
                open.countDown();
                AtomicBoolean stopped = new AtomicBoolean();
                while (!stopped.get()) {
                    endpoint.receive(tensor -> {
                        if (tensor.requestId().toString().equals("stop")) {
                            stopped.set(true);
                            MemorySegment bytes = tensor.data();
                            endpoint.close();
                            // still mapped until the handler returns: its bytes, not a fault or another tensor's
                            lastByteAfterClose.set(bytes.get(ValueLayout.JAVA_BYTE, bytes.byteSize() - 1));
                        }
                    }, Duration.ofMillis(20));
                }
            } catch (Throwable e) {
                failure.set(e);
            }
        }, "stopper");
        consumer.start();
        try (TensorEndpoint producer = TensorEndpoint.open(deployment("writer"))) {
            assertTrue(open.await(30, TimeUnit.SECONDS));
            Delivery before = producer.send("stopper", "before", filled(4096, 1));
            assertEquals(Delivery.Status.DELIVERED, before.await(Duration.ofSeconds(10)), before.toString());
            Delivery stop = producer.send("stopper", "stop", filled(4096, 2));
            assertEquals(Delivery.Status.DELIVERED, stop.await(Duration.ofSeconds(20)), stop.toString());
        }
        consumer.join(30_000);
        assertEquals(null, failure.get(), "the consumer's loop threw");
        assertEquals((byte) 2, lastByteAfterClose.get(), "the handler read its tensor after closing the endpoint");
    }

    /**
     * Ten tensors wait in one poll; the handler of the fifth ("stop") closes the endpoint: the first five are
     * DELIVERED, and the five after it, which no handler will have, are REFUSED at once (safe to send again), not
     * left to the death of the consumer's mailbox.
     */
    @Test
    void theTensorsOfAPollAfterAHandlerThatClosesAreRefused() throws Exception {
        CountDownLatch posted = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        TensorEndpoint consumer = TensorEndpoint.open(deployment("stopper"));
        Thread reader = new Thread(() -> {
            try {
                posted.await();
                consumer.receive(tensor -> {
                    if (tensor.requestId().toString().equals("stop")) {
                        consumer.close();
                    }
                }, Duration.ofSeconds(10));
            } catch (Throwable e) {
                failure.set(e);
            }
        }, "stopper");
        reader.start();
        Told told = new Told();
        try (TensorEndpoint producer = TensorEndpoint.open(deployment("writer"), told)) {
            for (int i = 0; i < 10; i++) {
                producer.post("stopper", i == 4 ? "stop" : "t" + i, filled(4096, i));
            }
            posted.countDown();
            assertTrue(told.awaitCount(10, 20_000), "told: " + told.outcomes);
        } finally {
            reader.join(30_000);
            consumer.close();
        }
        assertEquals(null, failure.get());
        assertEquals(Map.of("t0", "DELIVERED", "t1", "DELIVERED", "t2", "DELIVERED", "t3", "DELIVERED",
            "stop", "DELIVERED", "t5", "REFUSED", "t6", "REFUSED", "t7", "REFUSED", "t8", "REFUSED", "t9", "REFUSED"),
            told.outcomes);
    }

    /**
     * Another thread (a SIGTERM hook, a supervisor) closes the endpoint while a handler runs: the handler's tensor
     * is still ACKed when it returns (the close waits for it), told DELIVERED, not CONSUMER_DIED.
     */
    @Test
    void aCloseWhileAHandlerRunsWaitsForItAndItsTensorIsDelivered() throws Exception {
        CountDownLatch inHandler = new CountDownLatch(1);
        CountDownLatch closing = new CountDownLatch(1);
        TensorEndpoint consumer = TensorEndpoint.open(deployment("reader"));
        Thread reader = new Thread(() -> {
            try {
                consumer.receive(tensor -> {
                    inHandler.countDown();
                    try {
                        closing.await();
                        Thread.sleep(300); // the close has begun and waits
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }, Duration.ofSeconds(30));
            } catch (IllegalStateException closed) {
                // a receive after the close: the endpoint is closed
            }
        }, "reader");
        try (TensorEndpoint producer = TensorEndpoint.open(deployment("writer"))) {
            reader.start();
            Delivery delivery = producer.send("reader", "handled", filled(4096, 1));
            assertTrue(inHandler.await(30, TimeUnit.SECONDS));
            Thread closer = new Thread(consumer::close, "closer");
            closer.start();
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (closer.getState() != Thread.State.TIMED_WAITING && System.nanoTime() < deadline) {
                Thread.onSpinWait(); // the close waits for the handler (in ShmMailbox's bounded wait) from here
            }
            closing.countDown();
            closer.join(30_000);
            assertEquals(Delivery.Status.DELIVERED, delivery.await(Duration.ofSeconds(20)), delivery.toString());
        } finally {
            reader.join(30_000);
            consumer.close();
        }
    }

    /**
     * One tensor sent to b and c; b handles it; c (alive, holding it unACKed) is SIGKILLed: told PARTIAL, since b
     * handled it, not the definite CONSUMER_DIED a retry would act on.
     */
    @Test
    void aFanOutWhoseLastShareToGoIsADeathIsPartlyDelivered() throws Exception {
        ChildJvm c = ChildJvm.start(EndpointConsumer.class, shm.path().toString(), "handler-edges", "c", "keep");
        try (TensorEndpoint b = TensorEndpoint.open(deployment("b"));
             TensorEndpoint producer = TensorEndpoint.open(deployment("writer"))) {
            assertTrue(producer.awaitPeer("c", Duration.ofSeconds(60)), c.output());
            Delivery delivery = producer.send(List.of("b", "c"), "fanned", filled(4096, 1));
            assertEquals(1, b.receive(tensor -> { }, Duration.ofSeconds(20)), "b handles it");
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (!c.output().contains("received=1")) {
                assertTrue(System.nanoTime() < deadline, c.output());
                Thread.sleep(10);
            }
            while (producer.transport().statsSummary().partiallyAcked() == 0) { // b's ACK read before c dies
                assertTrue(System.nanoTime() < deadline, producer.transport().statsSummary().toLogLine());
                Thread.sleep(5);
            }
            c.process().destroyForcibly().waitFor(); // SIGKILL: c held its share
            assertEquals(Delivery.Status.FAILED, delivery.await(Duration.ofSeconds(30)), delivery.toString());
            assertEquals(Delivery.Failure.PARTIAL, delivery.failure(), delivery.toString());
            assertTrue(delivery.detail().contains("c"), delivery.detail());
        } finally {
            c.deleteLog();
        }
        Reclaimer.sweep(shm.path()); // the killed consumer's mailbox
    }
}
