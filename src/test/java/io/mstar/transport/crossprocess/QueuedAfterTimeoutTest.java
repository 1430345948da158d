package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A tensor that waits in the link's queue while its window is declared gone is never written afterwards. t1 is
 * handed over and its confirmation lost (a proxy drops what comes back); the connection drops and t2, sent in the
 * same window, queues; t1's timeout declares the window gone, which fails t2 as well (a definite failure); the
 * connection then comes back before t2's own deadline. t2 is pending from the moment it is queued, and the window's
 * timeout gives it up through the compare-and-set the writer hands it over with. (On the code before that change
 * this sequence did not write t2 either in three runs: its slot, freed with the window, failed the writer's view.)
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class QueuedAfterTimeoutTest {
    private static final long TIMEOUT_NS = 4_000_000_000L; // windows of a second (PendingTensors: 4 a timeout)

    @Test
    void aTensorQueuedWhenItsWindowTimesOutIsNeverWrittenAfterItsDefiniteFailure() throws Exception {
        Set<String> seen = ConcurrentHashMap.newKeySet();
        Map<String, String> told = new ConcurrentHashMap<>();
        DeliveryListener outcomes = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                told.put(requestId, "DELIVERED");
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                told.put(requestId, failure.name());
            }
        };
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Proxy proxy = new Proxy(nodes.endpointB)) {
            String entities = "prefill=" + nodes.endpointA + ",decode=127.0.0.1:" + proxy.port();
            try (TensorEndpoint consumer = TensorEndpoint.open(Deployment.of(nodes.config(false,
                     RemoteConfig.TIMEOUT_S, "4"), "pipe", "decode"));
                 TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true,
                     RemoteConfig.TIMEOUT_S, "4", RemoteConfig.ENTITIES, entities), "pipe", "prefill"), outcomes)) {
                Thread reader = Thread.ofPlatform().daemon().start(() -> {
                    while (!Thread.currentThread().isInterrupted()) {
                        try {
                            consumer.receive(t -> seen.add(t.requestId().toString()), Duration.ofMillis(50));
                        } catch (IllegalStateException closed) {
                            return;
                        }
                    }
                });
                Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096);
                assertTrue(producer.awaitPeer("decode", Duration.ofSeconds(20)));
                producer.post("decode", "warm", tensor);
                awaitTold(told, "warm");
                assertEquals("DELIVERED", told.get("warm"));
                long windowNs = TIMEOUT_NS / 4;
                while (System.nanoTime() % windowNs > windowNs / 20) { // at the start of a window
                    Thread.onSpinWait();
                }
                proxy.dropReturns(true); // t1 lands; its LANDED never comes back
                producer.post("decode", "t1", tensor);
                Thread.sleep(windowNs / 4_000_000);
                proxy.cut(); // the connection drops and no new one is taken
                Thread.sleep(windowNs / 2_000_000);
                producer.post("decode", "t2", tensor); // queued, in t1's window
                awaitTold(told, "t1");
                proxy.open(); // back before t2's own deadline
                awaitTold(told, "t2");
                Thread.sleep(2000); // a write after the failure would land by now
                reader.interrupt();
                System.out.println("t1 " + told.get("t1") + ", t2 " + told.get("t2") + ", the handler saw " + seen);
                assertEquals("IN_DOUBT", told.get("t1"), "t1 was handed over whole");
                Delivery.Failure t2 = Delivery.Failure.valueOf(told.get("t2"));
                assertFalse(t2.isDefinite() && seen.contains("t2"), "t2 was told " + t2 + " and reached the handler");
            }
        }
    }

    private static void awaitTold(Map<String, String> told, String requestId) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!told.containsKey(requestId) && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertTrue(told.containsKey(requestId), requestId + " was never told");
    }

    /** A TCP proxy to the consumer's node that can drop what comes back, cut its connections and refuse new ones. */
    private static final class Proxy implements AutoCloseable {
        private final InetSocketAddress target;
        private final int port;
        private final List<Socket> open = new CopyOnWriteArrayList<>();
        private volatile ServerSocket server;
        private volatile boolean dropReturns;

        Proxy(String endpoint) throws IOException {
            int colon = endpoint.lastIndexOf(':');
            this.target = new InetSocketAddress(endpoint.substring(0, colon), Integer.parseInt(endpoint.substring(colon + 1)));
            this.port = TwoNodes.freePorts()[0];
            open();
        }

        int port() {
            return port;
        }

        void dropReturns(boolean drop) {
            dropReturns = drop;
        }

        synchronized void open() throws IOException {
            dropReturns = false;
            ServerSocket s = new ServerSocket();
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
            server = s;
            Thread.ofPlatform().daemon().start(() -> accept(s));
        }

        synchronized void cut() throws IOException {
            server.close();
            for (Socket s : open) {
                try (s) {
                    s.setSoLinger(true, 0); // a reset: nothing it still holds arrives
                } catch (IOException closedAlready) {
                    // its pump saw the other side go
                }
            }
            open.clear();
        }

        private void accept(ServerSocket s) {
            while (!s.isClosed()) {
                try {
                    Socket in = s.accept();
                    Socket out = new Socket(target.getAddress(), target.getPort());
                    open.add(in);
                    open.add(out);
                    Thread.ofPlatform().daemon().start(() -> pump(in, out, false));
                    Thread.ofPlatform().daemon().start(() -> pump(out, in, true));
                } catch (IOException e) {
                    return; // closed
                }
            }
        }

        private void pump(Socket from, Socket to, boolean back) {
            byte[] buffer = new byte[64 << 10];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                for (int n; (n = in.read(buffer)) > 0; ) {
                    if (!(back && dropReturns)) {
                        out.write(buffer, 0, n);
                    }
                }
            } catch (IOException e) {
                // cut
            }
        }

        @Override
        public void close() throws IOException {
            cut();
        }
    }
}
