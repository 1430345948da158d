package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TransportConfig;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The library's peers through its public API, on the endpoint's fast path (a tensor posted as its
 * descriptor's record, read in place by a handler, ACKed on return, its outcome told to a listener: the
 * steady state allocates nothing):
 * {@code arena-send} (the producer fills its own buffer, {@code post} copies it into a slot),
 * {@code arena-claim} (the producer fills the claimed slot, then posts it), {@code arena-polled} (as
 * arena-claim, the slot written in place through {@code post(to, id, dtype, shape, writer)} and the outcomes
 * taken on the producer's own thread, which reads its ACKs itself) and {@code file} (the file
 * transport); {@code remote} is {@code arena-claim} across two "nodes": each JVM has a shared-memory directory
 * of its own and the tensors cross on the cross-node path (authenticated TCP on 127.0.0.1; TLS 1.3 too with
 * {@code -Dxbench.tlsDir} naming a directory with {@code node.p12} and {@code trust.p12}). A zero-byte tensor
 * ends the run.
 */
final class ArenaPeer {
    private static final String ENDPOINT = "mstar-xbench";

    private ArenaPeer() {
    }

    static Deployment deployment(String peer, String dir, String entity) throws IOException {
        Map<String, String> env = new HashMap<>(Map.of(TransportConfig.SHM_DIR, dir,
            TransportConfig.ARENA, peer.equals("file") ? "0" : "1",
            TransportConfig.MAX_SEGMENTS, "4"));
        if (peer.equals("remote")) {
            Path ports = Path.of(dir, "ports"); // chosen by the consumer, which starts first
            if (!Files.exists(ports)) {
                try (ServerSocket a = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                     ServerSocket b = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                    Files.writeString(ports, a.getLocalPort() + " " + b.getLocalPort());
                }
            }
            String[] port = Files.readString(ports).split(" ");
            String consumer = "127.0.0.1:" + port[0];
            String producer = "127.0.0.1:" + port[1];
            env.put(TransportConfig.SHM_DIR, Files.createDirectories(Path.of(dir, entity)).toString());
            env.put(RemoteConfig.LISTEN, entity.equals("consumer") ? consumer : producer);
            env.put(RemoteConfig.ENTITIES, "consumer=" + consumer + ",producer=" + producer);
            env.put(RemoteConfig.SECRET, "xbench-deployment-secret");
            if (!System.getProperty("xbench.tlsDir", "").isEmpty()) { // TLS 1.3 with the stores made there
                String tls = System.getProperty("xbench.tlsDir");
                env.put(RemoteConfig.TLS_KEYSTORE, tls + "/node.p12");
                env.put(RemoteConfig.TLS_TRUSTSTORE, tls + "/trust.p12");
                env.put(RemoteConfig.TLS_PASSWORD, "xbench-pass");
            }
        }
        return Deployment.of(TransportConfig.from(env::get), ENDPOINT, entity);
    }

    // The same backoff as the Aeron peer's loops: spin, yield, then park up to 100 us.
    private static IdleStrategy idleStrategy() {
        return new BackoffIdleStrategy(16, 8, 1_000, 100_000);
    }

    static void consumer(String peer, String dir) throws IOException {
        Deployment deployment = deployment(peer, dir, "consumer");
        Protocol.Verifier verifier = new Protocol.Verifier();
        boolean[] done = new boolean[1];
        TensorHandler check = tensor -> {
            if (tensor.nbytes() == 0) {
                done[0] = true;
            } else {
                verifier.check(tensor.memory(), tensor.offset(), tensor.nbytes());
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            System.out.println("READY");
            IdleStrategy idle = idleStrategy();
            while (!done[0]) {
                idle.idle(endpoint.poll(check, 64)); // the ACKs of one poll go back in one message
            }
        }
        System.out.println(verifier.summary());
    }

    static void producer(String peer, String dir, double seconds) throws Exception {
        Deployment deployment = deployment(peer, dir, "producer");
        boolean claim = peer.equals("arena-claim") || peer.equals("remote");
        boolean polled = peer.equals("arena-polled");
        Producer[] loop = new Producer[1];
        DeliveryListener outcomes = new DeliveryListener() { // told on the endpoint's ACK thread, in ACK order
            @Override
            public boolean toldWhenPolled() {
                return polled; // then on the producer's thread, in pollOutcomes
            }

            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                loop[0].acked();
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.err.println("not delivered: " + failure + ", " + detail);
                System.exit(3);
            }
        };
        try (Arena scratch = Arena.ofShared();
             TensorEndpoint endpoint = TensorEndpoint.open(deployment, outcomes)) {
            if (!endpoint.awaitPeer("consumer", Duration.ofSeconds(30))) {
                throw new IllegalStateException("the consumer did not start");
            }
            endpoint.prepareToSend();
            MemorySegment source = scratch.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
            Tensor[] payloads = new Tensor[Protocol.SIZES.length];
            for (int i = 0; i < payloads.length; i++) {
                payloads[i] = Tensor.of(DType.U8, source.asSlice(0, Protocol.SIZES[i]), Protocol.SIZES[i]);
            }
            long[][] shapes = new long[Protocol.SIZES.length][];
            for (int i = 0; i < shapes.length; i++) {
                shapes[i] = new long[] {Protocol.SIZES[i]};
            }
            long[] filling = new long[1];
            TensorRecords.Writer fill = room -> Protocol.fill(room, filling[0]);
            loop[0] = new Producer() {
                @Override
                void takeOutcomes() {
                    if (polled) {
                        endpoint.pollOutcomes(64);
                    }
                }

                @Override
                boolean pollsItsOutcomes() {
                    return polled;
                }

                @Override
                void send(long seq, long size) {
                    if (polled) {
                        filling[0] = seq;
                        endpoint.post("consumer", "x", DType.U8, shapes[Arrays.binarySearch(Protocol.SIZES, size)], fill);
                    } else if (claim) {
                        try (TensorClaim room = endpoint.claim("x", DType.U8, size)) {
                            Protocol.fill(room.memory(), seq);
                            endpoint.post("consumer", room);
                        }
                    } else {
                        Tensor payload = payloads[Arrays.binarySearch(Protocol.SIZES, size)];
                        Protocol.fill(payload.data(), seq);
                        endpoint.post("consumer", "x", payload);
                    }
                }
            };
            loop[0].run(seconds);
            endpoint.post("consumer", "end", Tensor.of(DType.U8, MemorySegment.NULL, 0));
            Thread.sleep(200); // the end marker's ACK
        }
    }
}
