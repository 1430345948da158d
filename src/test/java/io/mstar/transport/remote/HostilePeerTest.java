package io.mstar.transport.remote;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.foreign.Arena;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An attacker with a raw socket against a node that serves entity {@code decode}: each attempt is refused
 * (the connection closed), counted, and nothing reaches the consumer or stays in its arena. The attacker
 * either lacks the secret, or holds it and breaks the protocol (a peer of the deployment gone bad).
 */
class HostilePeerTest {
    private static final byte[] RIGHT = TwoNodes.SECRET.getBytes(StandardCharsets.UTF_8);

    /** Node B's consumer side, with a timeout of 1 s (or as given). */
    record Victim(TwoNodes nodes, TensorTransport consumer, RoutedMailbox inbox) implements AutoCloseable {
        static Victim open(TwoNodes nodes) {
            return open(nodes, "1");
        }

        static Victim open(TwoNodes nodes, String timeoutS, String... extra) {
            String[] env = Arrays.copyOf(extra, extra.length + 2);
            env[extra.length] = RemoteConfig.TIMEOUT_S;
            env[extra.length + 1] = timeoutS;
            Deployment b = Deployment.of(nodes.config(false, env), "pipe", "decode");
            TensorTransport consumer = TensorTransports.create(b, false);
            return new Victim(nodes, consumer, (RoutedMailbox) TensorTransports.mailbox(b));
        }

        RemoteStats stats() {
            return inbox.remoteStats();
        }

        /** Tensors the consumer got from anyone in {@code ms}. */
        int delivered(long ms) {
            AtomicInteger got = new AtomicInteger();
            long end = System.nanoTime() + ms * 1_000_000;
            while (System.nanoTime() < end) {
                inbox.receive(new TensorChannel.Listener() {
                    @Override
                    public void descriptors(String from, List<TensorDescriptor> batch) {
                        got.addAndGet(batch.size());
                        inbox.sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                    }

                    @Override
                    public void acks(String from, List<UUID> uuids) {
                    }
                }, Duration.ofMillis(20));
            }
            return got.get();
        }

        int port() {
            return Integer.parseInt(nodes.endpointB.substring(nodes.endpointB.lastIndexOf(':') + 1));
        }

        @Override
        public void close() {
            inbox.close();
            consumer.close();
        }
    }

    /** The attacking side of one connection: frames by hand. */
    static final class Attacker implements AutoCloseable {
        final Socket socket;
        final OutputStream out;
        final DataInputStream in;
        final byte[] nonce = Handshake.nonce();
        byte[] serverNonce;

        Attacker(int port) throws IOException {
            socket = new Socket("127.0.0.1", port);
            socket.setSoTimeout(10_000);
            out = socket.getOutputStream();
            in = new DataInputStream(socket.getInputStream());
        }

        void send(byte[] bytes) throws IOException {
            out.write(bytes);
            out.flush();
        }

        static byte[] frame(int type, byte[]... parts) {
            int n = 1 + Arrays.stream(parts).mapToInt(p -> p.length).sum();
            ByteBuffer b = ByteBuffer.allocate(4 + n).order(ByteOrder.LITTLE_ENDIAN).putInt(n).put((byte) type);
            for (byte[] p : parts) {
                b.put(p);
            }
            return b.array();
        }

        byte[] hello(String entity) {
            byte[] name = entity.getBytes(StandardCharsets.US_ASCII);
            ByteBuffer magic = ByteBuffer.allocate(5).order(ByteOrder.LITTLE_ENDIAN).putInt(RemoteProtocol.MAGIC)
                .put((byte) RemoteProtocol.VERSION);
            return frame(RemoteProtocol.HELLO, magic.array(), nonce, new byte[] {(byte) name.length}, name);
        }

        /** Reads the server's CHALLENGE; false when the connection was closed instead. */
        boolean challenge() throws IOException {
            byte[] frame = readFrame();
            if (frame == null) {
                return false;
            }
            serverNonce = Arrays.copyOfRange(frame, 1, 1 + RemoteProtocol.NONCE_BYTES);
            return true;
        }

        byte[] proof(byte[] secret, String as) {
            return frame(RemoteProtocol.PROOF, new Handshake(secret).proof(true, nonce, serverNonce, as, "decode"));
        }

        /** A whole handshake as {@code as} with the right secret: the attacker is a member gone bad. */
        Attacker authenticated(String as) throws IOException {
            send(hello(as));
            assertTrue(challenge());
            send(proof(RIGHT, as));
            assertTrue(readFrame() != null, "no WELCOME");
            return this;
        }

        byte[] readFrame() throws IOException {
            try {
                int n = Integer.reverseBytes(in.readInt());
                byte[] frame = new byte[n];
                in.readFully(frame);
                return frame;
            } catch (IOException e) { // EOF or reset: closed
                return null;
            }
        }

        /** Whether the other side closed the connection (within the socket's timeout). */
        boolean closedByPeer() throws IOException {
            try {
                while (true) {
                    if (in.read() < 0) {
                        return true;
                    }
                }
            } catch (java.net.SocketTimeoutException e) {
                return false;
            } catch (IOException e) {
                return true; // reset
            }
        }

        static byte[] tensorHeader(long nbytes, long[] shape, DType dtype, String requestId, int lengthDelta) {
            return tensorHeader(42, nbytes, shape, dtype, requestId, lengthDelta);
        }

        /** A TENSOR header of uuid (n, n + 1). */
        static byte[] tensorHeader(long n, long nbytes, long[] shape, DType dtype, String requestId, int lengthDelta) {
            byte[] id = requestId.getBytes(StandardCharsets.UTF_8);
            ByteBuffer b = ByteBuffer.allocate(RemoteProtocol.TENSOR_FIXED - 1 + 8 * shape.length + id.length)
                .order(ByteOrder.LITTLE_ENDIAN);
            b.putLong(n).putLong(n + 1).putLong(n).putLong(n + 1).putLong(nbytes).putInt(0).put((byte) dtype.code()).put((byte) shape.length)
                .putShort((short) id.length);
            for (long d : shape) {
                b.putLong(d);
            }
            b.put(id);
            byte[] f = frame(RemoteProtocol.TENSOR, b.array());
            ByteBuffer.wrap(f).order(ByteOrder.LITTLE_ENDIAN).putInt(0, f.length - 4 + lengthDelta);
            return lengthDelta < 0 ? Arrays.copyOf(f, f.length + lengthDelta) : f;
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }

    @Test
    void noSecretWrongSecretAReplayAndAnUnplacedEntityAreRefusedBeforeAnyTensor() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes)) {
            try (Attacker a = new Attacker(victim.port())) { // no secret: a proof of random bytes
                a.send(a.hello("prefill"));
                assertTrue(a.challenge());
                a.send(Attacker.frame(RemoteProtocol.PROOF, Handshake.nonce()));
                assertTrue(a.closedByPeer(), "a proof without the secret was accepted");
            }
            try (Attacker a = new Attacker(victim.port())) { // the wrong secret
                a.send(a.hello("prefill"));
                assertTrue(a.challenge());
                a.send(a.proof("not-the-deployment-secret".getBytes(StandardCharsets.UTF_8), "prefill"));
                assertTrue(a.closedByPeer(), "a proof with the wrong secret was accepted");
            }
            byte[] recordedHello;
            byte[] recordedProof;
            try (Attacker honest = new Attacker(victim.port())) { // an honest handshake, recorded on the wire
                recordedHello = honest.hello("prefill");
                honest.send(recordedHello);
                assertTrue(honest.challenge());
                recordedProof = honest.proof(RIGHT, "prefill");
                honest.send(recordedProof);
                assertTrue(honest.readFrame() != null);
            }
            try (Attacker replay = new Attacker(victim.port())) { // replayed: the server's nonce is new
                replay.send(recordedHello);
                assertTrue(replay.challenge());
                replay.send(recordedProof);
                assertTrue(replay.closedByPeer(), "a replayed handshake was accepted");
            }
            try (Attacker a = new Attacker(victim.port())) { // a sender the map does not place, secret or not
                a.send(a.hello("tokenizer"));
                assertFalse(a.challenge(), "an entity the map does not place got a challenge");
            }
            try (Attacker a = new Attacker(victim.port())) { // not this protocol at all
                a.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                assertTrue(a.closedByPeer());
            }
            assertEquals(0, victim.delivered(200));
            waitFor(() -> victim.stats().rejectedConnections() == 5, "5 refusals counted: " + victim.stats());
            assertEquals(0, victim.stats().protocolErrors(), "none of them got in");
        }
    }

    @Test
    void framesThatBreakTheProtocolCloseTheConnectionAndLeakNothing() throws Exception {
        // A timeout of 10 s: each frame must close its connection at once, not by a timer.
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes, "10")) {
            List<byte[]> bad = List.of(
                ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(1 << 30).putInt(5).array(), // oversized
                Attacker.frame(RemoteProtocol.TENSOR, new byte[8]), // truncated: shorter than its fixed part
                Attacker.tensorHeader(100, new long[] {4096}, DType.U8, "r", 0), // nbytes does not match the shape
                Attacker.tensorHeader(4096, new long[] {4096}, DType.U8, "x".repeat(4000), 0), // id over the limit
                Attacker.tensorHeader(8, new long[] {-1, -8}, DType.U8, "r", 0), // negative dimensions
                Attacker.tensorHeader(16, new long[] {1, 1, 1, 1, 1, 1, 1, 1, 1, 16}, DType.U8, "r", 0), // rank 10
                Attacker.frame(RemoteProtocol.LANDED, new byte[16]), // a frame only a receiver sends
                Attacker.frame(99, new byte[16])); // unknown type
            for (byte[] frame : bad) {
                try (Attacker a = new Attacker(victim.port()).authenticated("prefill")) {
                    a.socket.setSoTimeout(3000);
                    a.send(frame);
                    assertTrue(a.closedByPeer(), "not closed after " + Arrays.toString(Arrays.copyOf(frame, 12)));
                }
            }
            waitFor(() -> victim.stats().protocolErrors() == bad.size(), "each counted: " + victim.stats());
            assertEquals(0, victim.delivered(200));
            assertEquals(0, victim.inbox.link().landingBytes(), "a slot was left claimed");
        }
    }

    @Test
    void aHeaderWhoseBytesNeverComeIsAbortedAndItsSlotFreed() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes);
             Attacker a = new Attacker(victim.port()).authenticated("prefill")) {
            a.send(Attacker.tensorHeader(32 << 20, new long[] {32 << 20}, DType.U8, "no-data", 0));
            a.send(new byte[1000]); // a start, then nothing
            waitFor(() -> victim.inbox.link().landingBytes() > 0, "the tensor was never claimed");
            assertTrue(a.closedByPeer(), "the connection stayed open past the timeout (1 s)");
            waitFor(() -> victim.inbox.link().landingBytes() == 0, "its slot stayed claimed");
            assertEquals(1, victim.stats().aborted());
            assertEquals(0, victim.delivered(200));
        }
    }

    /**
     * A member of the deployment that names itself prefill (from prefill's address, with the secret) lands, first,
     * a tensor of its own bytes under the uuid prefill's next tensor has. Prefill's tensor then repeats no tensor
     * that landed (other bytes, the same first uuid): it is refused, never confirmed, so prefill is not told
     * DELIVERED for bytes it did not deliver. Once, it was confirmed as a duplicate and its bytes skipped.
     */
    @Test
    void aTensorUnderAUuidThatLandedWithOtherBytesIsRefusedNotConfirmed() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes, "5");
             Arena arena = Arena.ofShared()) {
            Deployment a = Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S, "5"), "pipe", "prefill");
            try (TensorTransport producer = TensorTransports.create(a, false);
                 RoutedMailbox outbox = (RoutedMailbox) TensorTransports.mailbox(a, producer)) {
                List<String> refused = java.util.Collections.synchronizedList(new ArrayList<>());
                outbox.onRefused(new RemoteLink.RefusalListener() {
                    @Override
                    public void refused(String to, long msb, long lsb, String why) {
                        refused.add(why);
                    }

                    @Override
                    public void timedOut(String to, long msb, long lsb, boolean bytesLeft, String why) {
                    }

                    @Override
                    public void unreachable(String to, long msb, long lsb,
                                            io.mstar.transport.exceptions.PeerUnavailableException why) {
                    }
                });
                List<TensorDescriptor> honest = producer.send("honest", List.of(RemoteLinkTest.pattern(arena, 4096, 1)));
                UUID uuid = honest.getFirst().uuid();
                try (Attacker impostor = new Attacker(victim.port()).authenticated("prefill")) {
                    byte[] body = new byte[4096]; // not prefill's bytes
                    java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
                    crc.update(body);
                    impostor.send(tensorUnder(uuid, body.length, (int) crc.getValue()));
                    impostor.send(body);
                    waitFor(() -> victim.stats().tensorsReceived() >= 1, "the impostor's tensor never landed");
                    outbox.sendDescriptors("decode", honest);
                    waitFor(() -> !refused.isEmpty(), "prefill's tensor was confirmed as a repeat of the impostor's");
                }
                assertTrue(refused.getFirst().contains("other bytes"), refused.toString());
                assertEquals(0, victim.stats().duplicates(), "confirmed as a repeat");
                assertEquals(1, victim.delivered(200), "only the impostor's tensor reached the consumer");
            }
        }
    }

    // A TENSOR header naming `uuid` as its own and its first send's, of `nbytes` bytes whose CRC32C is `crc`.
    private static byte[] tensorUnder(UUID uuid, int nbytes, int crc) {
        byte[] id = "impostor".getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(RemoteProtocol.TENSOR_FIXED - 1 + 8 + id.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits())
            .putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits()).putLong(nbytes).putInt(crc)
            .put((byte) DType.U8.code()).put((byte) 1).putShort((short) id.length).putLong(nbytes).put(id);
        return Attacker.frame(RemoteProtocol.TENSOR, b.array());
    }

    @Test
    void aFloodOfConnectionsIsCappedAndTheHonestStreamGoesOn() throws Exception {
        // A timeout of 10 s (5 s for a handshake): the connections over the cap must be refused at once.
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes, "10");
             Arena arena = Arena.ofShared()) {
            Deployment a = Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S, "5"), "pipe", "prefill");
            try (TensorTransport producer = TensorTransports.create(a, false);
                 TensorChannel outbox = TensorTransports.mailbox(a, producer)) {
                assertTrue(outbox.awaitPeer("decode", Duration.ofSeconds(20)));
                double before = rate(producer, outbox, victim, arena);
                List<Attacker> flood = new ArrayList<>();
                for (int i = 0; i < 200; i++) {
                    try {
                        flood.add(new Attacker(victim.port()));
                    } catch (IOException e) {
                        break; // the backlog is full: also a refusal
                    }
                }
                double during = rate(producer, outbox, victim, arena);
                long refusedAtOnce = victim.stats().rejectedConnections(); // within ~1 s: before any handshake timer
                for (Attacker f : flood) {
                    f.close();
                }
                System.out.printf("honest stream: %.0f tensors/s before the flood, %.0f during (%.2fx); %s%n",
                    before, during, during / before, victim.stats().toLogLine());
                assertTrue(refusedAtOnce >= 200 - ConnectionGate.MAX_HANDSHAKES_PER_ADDRESS,
                    "connections over the cap were not refused: " + refusedAtOnce);
            }
        }
    }

    // Tensors of 1 MiB per second, sent and ACKed one at a time by the honest producer, for 1 s.
    private static double rate(TensorTransport producer, TensorChannel outbox, Victim victim, Arena arena) {
        io.mstar.transport.Tensor tensor = RemoteLinkTest.pattern(arena, 1 << 20, 7);
        int done = 0;
        long start = System.nanoTime();
        while (System.nanoTime() - start < 1_000_000_000L) {
            outbox.sendDescriptors("decode", producer.send("honest", List.of(tensor)));
            int[] got = {0};
            while (got[0] == 0) {
                victim.inbox.receive(new TensorChannel.Listener() {
                    @Override
                    public void descriptors(String from, List<TensorDescriptor> batch) {
                        for (TensorDescriptor d : batch) {
                            try (ReceivedTensor t = victim.consumer.receive(d)) {
                                assertTrue(RemoteLinkTest.matches(t.data(), 7));
                            }
                        }
                        victim.inbox.sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                        got[0] += batch.size();
                    }

                    @Override
                    public void acks(String from, List<UUID> uuids) {
                    }
                }, Duration.ofMillis(20));
            }
            AtomicInteger acked = new AtomicInteger();
            while (acked.get() == 0) {
                outbox.receive(RemoteLinkTest.ackListener(producer, acked), Duration.ofMillis(20));
            }
            done++;
        }
        return done / ((System.nanoTime() - start) / 1e9);
    }

    static void waitFor(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 15_000_000_000L;
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what);
            Thread.sleep(10);
        }
    }
}
