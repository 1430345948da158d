package io.mstar.transport.endpoint;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.acks.TensorFates;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What close tells: an ACK that came before the close decides its tensor (DELIVERED, not CLOSED); every tensor still
 * in flight is told CLOSED whatever the transport's close throws, and all of them when a listener told on a thread
 * with a limit closes. The producer's mailbox and transport are the library's, seen through proxies that hold the
 * endpoint's reads back (the ACK thread has not run yet) or make the transport's close throw.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class EndpointCloseTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private final DefaultAssembly assembly = new DefaultAssembly();
    private volatile Thread readsLetThrough; // the one thread whose mailbox reads go through; null: every thread's

    private Deployment deployment(String entity) {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2");
        return Deployment.of(TransportConfig.from(env::get), "endpoint-close", entity);
    }

    private static Tensor small(int value) {
        return Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]).fill((byte) value), 4096);
    }

    /** The library's producer endpoint, its reads held back from every thread but {@link #readsLetThrough}. */
    private Endpoint producer(DeliveryListener listener, boolean transportCloseThrows) {
        Deployment deployment = deployment("writer");
        TensorTransport real = assembly.transport(deployment, false);
        TensorTransport transport = proxy(real, (p, m, args) -> {
            Object result = call(real, m, args);
            if (transportCloseThrows && m.getName().equals("close")) {
                throw new IllegalStateException("the transport's close threw");
            }
            return result;
        }, TensorTransport.class, TensorFates.Source.class);
        TensorChannel mailbox = assembly.mailbox(deployment, real);
        TensorChannel.Records records = mailbox.records();
        TensorChannel.Records held = proxy(records, (p, m, args) -> {
            Thread through = readsLetThrough;
            if (m.getName().equals("pollRecords") && through != null && through != Thread.currentThread()) {
                return 0;
            }
            return call(records, m, args);
        }, TensorChannel.Records.class);
        TensorChannel channel = proxy(mailbox, (p, m, args) -> m.getName().equals("records") ? held
            : call(mailbox, m, args), TensorChannel.class);
        return new Endpoint(deployment, transport, channel, listener);
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Object target, InvocationHandler handler, Class<T> type, Class<?>... more) {
        List<Class<?>> types = new ArrayList<>(List.of(type));
        Collections.addAll(types, more);
        return (T) Proxy.newProxyInstance(EndpointCloseTest.class.getClassLoader(), types.toArray(Class<?>[]::new),
            handler);
    }

    private static Object call(Object target, java.lang.reflect.Method m, Object[] args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** The outcomes heard, as "requestId OUTCOME". */
    private static class Heard implements DeliveryListener {
        final List<String> told = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void delivered(String requestId, long uuidMsb, long uuidLsb) {
            told.add(requestId + " DELIVERED");
        }

        @Override
        public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
            told.add(requestId + " " + failure);
        }
    }

    /**
     * The consumer handled the tensor and its ACK waits in the producer's mailbox, unread (no thread of the producer
     * has read since): close reads it first, and the tensor is told DELIVERED, not CLOSED.
     */
    @Test
    void anAckWaitingUnreadWhenTheEndpointClosesDecidesItsTensor() throws Exception {
        Heard heard = new Heard();
        try (TensorEndpoint consumer = TensorEndpoint.open(deployment("reader"))) {
            Endpoint producer = producer(heard, false);
            readsLetThrough = Thread.currentThread();
            producer.post("reader", "handled", small(1));
            readsLetThrough = new Thread(() -> { }); // from here on, no thread of the producer reads
            assertEquals(1, consumer.receive(tensor -> { }, Duration.ofSeconds(10)));
            Thread.sleep(100); // the ACK is in the producer's mailbox
            assertTrue(heard.told.isEmpty(), "nothing read yet: " + heard.told);
            readsLetThrough = Thread.currentThread(); // the closing thread
            producer.close();
        }
        assertEquals(List.of("handled DELIVERED"), heard.told);
    }

    /** The transport's close throws: every tensor in flight is still told CLOSED, and the exception reaches the caller. */
    @Test
    void aTransportWhoseCloseThrowsLeavesNoTensorUntold() throws Exception {
        Heard heard = new Heard();
        try (TensorEndpoint consumer = TensorEndpoint.open(deployment("reader"))) {
            Endpoint producer = producer(heard, true);
            producer.post("reader", "in-flight", small(1)); // the reader never receives
            assertThrows(IllegalStateException.class, producer::close);
        }
        assertEquals(List.of("in-flight CLOSED"), heard.told);
    }

    /**
     * A listener that closes the endpoint when told an outcome, on the posting thread (whose telling stops after
     * {@value MailboxReading#APPLICATION_TELLS}): every tensor still in flight, hundreds, is told CLOSED before close
     * returns to it; the ACK thread, stopped by the close, tells none of them.
     */
    @Test
    void aListenerThatClosesOnALimitedTellingThreadHasEveryClosedOutcomeTold() throws Exception {
        int stuck = 300;
        Endpoint[] producerRef = new Endpoint[1];
        Heard heard = new Heard() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                super.delivered(requestId, uuidMsb, uuidLsb);
                producerRef[0].close();
            }
        };
        try (TensorEndpoint idle = TensorEndpoint.open(deployment("idle"));
             TensorEndpoint reader = TensorEndpoint.open(deployment("reader"))) {
            Endpoint producer = producer(heard, false);
            producerRef[0] = producer;
            readsLetThrough = Thread.currentThread(); // outcomes are told here, after a post's read, 64 at most
            for (int i = 0; i < stuck; i++) {
                producer.post("idle", "stuck-" + i, small(i)); // never received
            }
            producer.post("reader", "handled", small(1));
            assertEquals(1, reader.receive(tensor -> { }, Duration.ofSeconds(10)));
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (heard.told.isEmpty() && System.nanoTime() < deadline) {
                producer.readAcksIfIdle(); // reads the ACK (unless the ACK thread holds the mailbox this instant),
                Thread.sleep(1); // tells up to 64: the listener closes there
            }
            assertTrue(heard.told.contains("handled DELIVERED"), "the listener was told: " + heard.told.size());
        }
        assertEquals(stuck + 1, heard.told.size(), "every post told once: " + heard.told.size());
        assertEquals(stuck, heard.told.stream().filter(s -> s.endsWith("CLOSED")).count());
    }
}
