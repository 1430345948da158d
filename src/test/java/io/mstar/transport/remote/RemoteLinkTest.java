package io.mstar.transport.remote;

import io.mstar.transport.Delivery;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.exceptions.PeerRejectedException;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The cross-node path between two nodes in one JVM: two shared-memory directories, TCP on 127.0.0.1. */
class RemoteLinkTest {
    // Both sides of a DATA chunk boundary (2 MiB messages), a tensor of three chunks, the small sizes.
    private static final long[] SIZES = {4096, 65_536 + 8, 1 << 20, (2 << 20) - 64, (5 << 20) + 24, 8};

    @Test
    void tensorsLandWholeOnTheOtherNodeAndBothSidesAreFreedByTheAcks() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             Sides sides = Sides.open(nodes);
             Arena arena = Arena.ofConfined()) {
            TensorTransport producer = sides.producer();
            TensorChannel outbox = sides.outbox();
            TensorTransport consumer = sides.consumer();
            TensorChannel inbox = sides.inbox();
            for (int i = 0; i < SIZES.length; i++) {
                outbox.sendDescriptors("decode", producer.send("r" + i, List.of(pattern(arena, SIZES[i], i))));
            }
            List<String> got = new ArrayList<>();
            pump(inbox, new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    for (TensorDescriptor d : batch) {
                        try (ReceivedTensor t = consumer.receive(d)) {
                            int seq = Integer.parseInt(d.requestId().substring(1));
                            assertEquals(SIZES[seq], d.nbytes());
                            assertTrue(matches(t.data(), seq), "tensor " + seq + " differs");
                            got.add(from + ":" + d.requestId());
                        }
                    }
                    inbox.sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            }, () -> got.size() == SIZES.length);
            assertEquals(List.of("prefill:r0", "prefill:r1", "prefill:r2", "prefill:r3", "prefill:r4", "prefill:r5"), got);
            AtomicInteger acked = new AtomicInteger();
            pump(outbox, new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                    assertEquals("decode", from);
                    producer.ack(from, uuids);
                    acked.addAndGet(uuids.size());
                }
            }, () -> acked.get() == SIZES.length);
            assertEquals(0, producer.statsSummary().inFlight());
            RemoteStats sent = ((RoutedMailbox) outbox).remoteStats();
            RemoteStats received = ((RoutedMailbox) inbox).remoteStats();
            assertEquals(SIZES.length, sent.tensorsSent());
            assertEquals(SIZES.length, sent.landed());
            assertEquals(SIZES.length, received.tensorsReceived());
            assertEquals(sent.bytesSent(), received.bytesReceived());
            assertEquals(0, received.aborted());
            assertEquals(1, sent.connections(), "the sender counts the connection it opened"); // it counted 0
            assertEquals(1, received.connections(), "the receiver counts the one it accepted");
        }
    }

    @Test
    void theRecordPathCrossesNodesToo() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             Sides sides = Sides.open(nodes);
             Arena arena = Arena.ofConfined()) {
            TensorTransport producer = sides.producer();
            TensorChannel outbox = sides.outbox();
            TensorTransport consumer = sides.consumer();
            TensorChannel inbox = sides.inbox();
            MemorySegment record = arena.allocate(512);
            int length = producer.records().sendInto("r0", pattern(arena, 300_000, 0), record, 0);
            outbox.records().sendDescriptorRecord("decode", record, 0, length);
            AtomicInteger read = new AtomicInteger();
            while (read.get() == 0) {
                inbox.records().pollRecords(new TensorChannel.RecordListener() {
                    @Override
                    public void descriptor(String from, MemorySegment r, long offset, int n) {
                        consumer.records().receive(r, offset, n, (data, at, bytes) -> assertTrue(matches(data.asSlice(at, bytes), 0)));
                        inbox.records().sendAck(from, DescriptorCodec.uuidMsb(r, offset), DescriptorCodec.uuidLsb(r, offset));
                        read.incrementAndGet();
                    }

                    @Override
                    public void ack(String from, long msb, long lsb) {
                    }
                }, 16);
                Thread.onSpinWait();
            }
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (producer.statsSummary().inFlight() > 0 && System.nanoTime() < deadline) {
                outbox.records().pollRecords(new TensorChannel.RecordListener() {
                    @Override
                    public void descriptor(String from, MemorySegment r, long offset, int n) {
                    }

                    @Override
                    public void ack(String from, long msb, long lsb) {
                        producer.records().ack(msb, lsb);
                    }
                }, 16);
            }
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void aFanOutTensorIsFreedOnceTheLocalConsumerAckedAndTheRemoteOneLandedIt() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             Sides sides = Sides.open(nodes);
             TensorChannel local = TensorTransports.mailbox(ShmTestDir.deployment(nodes.dirA, "pipe", "local"));
             Arena arena = Arena.ofConfined()) {
            TensorTransport producer = sides.producer();
            TensorChannel outbox = sides.outbox();
            List<String> readers = List.of("local", "decode");
            List<TensorDescriptor> sent = producer.send("r", List.of(pattern(arena, 200_000, 3)), readers);
            outbox.sendDescriptors(readers, sent);
            AtomicInteger acked = new AtomicInteger();
            pump(outbox, ackListener(producer, acked), () -> acked.get() == 1); // decode's node holds it
            assertEquals(1, producer.statsSummary().inFlight(), "the local consumer has not ACKed yet");
            assertEquals(1, producer.statsSummary().partiallyAcked());
            List<TensorDescriptor> got = new ArrayList<>();
            pump(local, new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    got.addAll(batch);
                    local.sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            }, () -> !got.isEmpty());
            pump(outbox, ackListener(producer, acked), () -> acked.get() == 2);
            assertEquals(0, producer.statsSummary().inFlight());
            assertEquals(0, producer.statsSummary().ignoredAcks());
            int[] landed = {0};
            pump(sides.inbox(), new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    try (ReceivedTensor t = sides.consumer().receive(batch.getFirst())) {
                        assertTrue(matches(t.data(), 3));
                    }
                    sides.inbox().sendAcks(from, List.of(batch.getFirst().uuid()));
                    landed[0]++;
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            }, () -> landed[0] == 1);
        }
    }

    /** Fan-out to a local consumer and two on another node: the slot is freed once all three answered. */
    @Test
    void aFanOutToTwoRemoteConsumersAndOneLocalFreesAfterAllThree() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode", "decode2");
             Sides sides = Sides.open(nodes);
             TensorChannel local = TensorTransports.mailbox(ShmTestDir.deployment(nodes.dirA, "pipe", "local"));
             Arena arena = Arena.ofConfined()) {
            Deployment b2 = Deployment.of(nodes.config(false, RemoteConfig.LISTEN, nodes.endpointB2), "pipe", "decode2");
            try (TensorTransport consumer2 = TensorTransports.create(b2, false);
                 TensorChannel inbox2 = TensorTransports.mailbox(b2)) {
                TensorTransport producer = sides.producer();
                TensorChannel outbox = sides.outbox();
                assertTrue(outbox.awaitPeer("decode2", Duration.ofSeconds(20)));
                int count = 20;
                List<String> readers = List.of("local", "decode", "decode2");
                for (int i = 0; i < count; i++) {
                    outbox.sendDescriptors(readers, producer.send("r" + i, List.of(pattern(arena, 100_000 + i, i)), readers));
                }
                AtomicInteger acked = new AtomicInteger();
                pump(outbox, ackListener(producer, acked), () -> acked.get() == 2 * count); // both nodes hold them
                assertEquals(count, producer.statsSummary().inFlight(), "the local consumer has not ACKed yet");
                int[] read = new int[3];
                TensorChannel[] inboxes = {local, sides.inbox(), inbox2};
                TensorTransport[] transports = {sides.producer(), sides.consumer(), consumer2};
                for (int k = 0; k < 3; k++) {
                    int at = k;
                    pump(inboxes[k], new TensorChannel.Listener() {
                        @Override
                        public void descriptors(String from, List<TensorDescriptor> batch) {
                            for (TensorDescriptor d : batch) {
                                try (ReceivedTensor t = transports[at].receive(d)) {
                                    assertTrue(matches(t.data(), Integer.parseInt(d.requestId().substring(1))));
                                }
                                read[at]++;
                            }
                            inboxes[at].sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                        }

                        @Override
                        public void acks(String from, List<UUID> uuids) {
                        }
                    }, () -> read[at] == count);
                }
                pump(outbox, ackListener(producer, acked), () -> acked.get() == 3 * count);
                assertEquals(0, producer.statsSummary().inFlight(), "a slot was not freed");
                assertEquals(0, producer.statsSummary().ignoredAcks());
                RemoteStats sent = ((RoutedMailbox) outbox).remoteStats();
                assertEquals(2 * count, sent.landed(), "each remote consumer's confirmation counts: " + sent);
                assertEquals(0, sent.lateConfirmations());
                long deadline = System.nanoTime() + 10_000_000_000L;
                while ((((RoutedMailbox) sides.inbox()).link().landingBytes() > 0
                    || ((RoutedMailbox) inbox2).link().landingBytes() > 0) && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertEquals(0, ((RoutedMailbox) sides.inbox()).link().landingBytes(), "a landing slot was not freed");
                assertEquals(0, ((RoutedMailbox) inbox2).link().landingBytes(), "a landing slot was not freed");
            }
        }
    }

    /** TLS 1.3 with certificates on both sides carries tensors; a node without TLS cannot connect to one with it. */
    @Test
    void tlsWithCertificatesOnBothSidesCarriesTensorsAndAPlainPeerIsRefused() throws Exception {
        Path stores = Files.createTempDirectory("mstar-tls-");
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Arena arena = Arena.ofConfined()) {
            String keytool = Path.of(System.getProperty("java.home"), "bin", "keytool").toString();
            run(keytool, "-genkeypair", "-alias", "node", "-keyalg", "EC", "-groupname", "secp256r1", "-dname",
                "CN=test-node", "-validity", "2", "-storetype", "PKCS12", "-keystore", stores + "/node.p12",
                "-storepass", "test-pass");
            run(keytool, "-exportcert", "-alias", "node", "-keystore", stores + "/node.p12", "-storepass", "test-pass",
                "-file", stores + "/node.crt");
            run(keytool, "-importcert", "-noprompt", "-alias", "node", "-file", stores + "/node.crt", "-keystore",
                stores + "/trust.p12", "-storetype", "PKCS12", "-storepass", "test-pass");
            String[] tls = {RemoteConfig.TLS_KEYSTORE, stores + "/node.p12", RemoteConfig.TLS_TRUSTSTORE,
                stores + "/trust.p12", RemoteConfig.TLS_PASSWORD, "test-pass", RemoteConfig.TIMEOUT_S, "3"};
            Deployment a = Deployment.of(nodes.config(true, tls), "pipe", "prefill");
            Deployment b = Deployment.of(nodes.config(false, tls), "pipe", "decode");
            Deployment plain = Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S, "3"), "pipe", "prefill");
            try (TensorTransport consumer = TensorTransports.create(b, false);
                 TensorChannel inbox = TensorTransports.mailbox(b)) {
                try (TensorChannel outbox = TensorTransports.mailbox(plain)) {
                    PeerRejectedException e = assertThrows(PeerRejectedException.class,
                        () -> outbox.awaitPeer("decode", Duration.ofSeconds(3)), "a peer without TLS got in");
                    assertTrue(e.getMessage().contains("TLS"), e.getMessage());
                }
                try (TensorTransport producer = TensorTransports.create(a, false);
                     TensorChannel outbox = TensorTransports.mailbox(a, producer)) {
                    assertTrue(outbox.awaitPeer("decode", Duration.ofSeconds(20)));
                    outbox.sendDescriptors("decode", producer.send("r0", List.of(pattern(arena, 3 << 20, 5))));
                    int[] got = {0};
                    pump(inbox, new TensorChannel.Listener() {
                        @Override
                        public void descriptors(String from, List<TensorDescriptor> batch) {
                            try (ReceivedTensor t = consumer.receive(batch.getFirst())) {
                                assertTrue(matches(t.data(), 5));
                            }
                            inbox.sendAcks(from, List.of(batch.getFirst().uuid()));
                            got[0]++;
                        }

                        @Override
                        public void acks(String from, List<UUID> uuids) {
                        }
                    }, () -> got[0] == 1);
                    AtomicInteger acked = new AtomicInteger();
                    pump(outbox, ackListener(producer, acked), () -> acked.get() == 1);
                    assertEquals(0, producer.statsSummary().inFlight());
                }
            }
        } finally {
            ShmTestDir.deleteTree(stores);
        }
    }

    // A CI run on a busy node: the plain peer's last try was still in its handshake when awaitPeer's 3 s ran out,
    // and a peer that had refused every try until then was reported as not there (awaitPeer false). A fake node B
    // refuses the first connection and holds every later one silent: the refusal is what the caller must be told.
    @Test
    void aPeerThatRefusedAndThenHoldsTheLastTrySilentIsToldRejectedNotAbsent() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             ServerSocket nodeB = new ServerSocket()) {
            nodeB.bind(TcpCarrier.address(nodes.endpointB));
            List<Socket> held = new ArrayList<>();
            Thread acceptor = Thread.ofVirtual().start(() -> {
                try {
                    nodeB.accept().close();
                    while (true) {
                        held.add(nodeB.accept());
                    }
                } catch (IOException closed) {
                    // the test is over
                }
            });
            try (TensorChannel outbox = TensorTransports.mailbox(Deployment.of(nodes.config(true), "pipe", "prefill"))) {
                PeerRejectedException e = assertThrows(PeerRejectedException.class,
                    () -> outbox.awaitPeer("decode", Duration.ofSeconds(2)), "a refusing peer was told absent");
                assertTrue(e.getMessage().contains("closed the connection before its challenge"), e.getMessage());
            } finally {
                nodeB.close();
                acceptor.join();
                for (Socket s : held) {
                    s.close();
                }
            }
        }
    }

    private static void run(String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertEquals(0, p.waitFor(), String.join(" ", command) + ": " + out);
    }

    @Test
    void aSendToAnEntityNobodyServesFailsAfterTheTimeoutAndTheTensorStaysTheCallers() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            Deployment a = Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S, "1"), "pipe", "prefill");
            try (TensorTransport producer = TensorTransports.create(a, false);
                 TensorChannel outbox = TensorTransports.mailbox(a, producer);
                 Arena arena = Arena.ofConfined()) {
                List<TensorDescriptor> sent = producer.send("r", List.of(pattern(arena, 1 << 20, 1)));
                long start = System.nanoTime();
                PeerUnavailableException e = assertThrows(PeerUnavailableException.class,
                    () -> outbox.sendDescriptors("decode", sent));
                assertEquals("decode", e.entity());
                assertTrue(e.getMessage().contains(nodes.endpointB), e.getMessage());
                assertTrue(System.nanoTime() - start < 15_000_000_000L, "the send must not hang");
                assertEquals(1, producer.statsSummary().inFlight(), "the tensor stays the caller's");
                producer.ack(List.of(sent.getFirst().uuid()));
                assertEquals(0, ((RoutedMailbox) outbox).remoteStats().tensorsSent());
            }
        }
    }

    @Test
    void aFullReceivingArenaBackPressuresTheSenderUntilTheConsumerAcks() throws Exception {
        int count = 128; // 64 MiB: more than the socket buffers and the sender's queue hold
        int size = 512 << 10;
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             // Node B strict and small: a landing waits for the consumer's ACKs and reads nothing meanwhile.
             Sides sides = Sides.open(nodes, TransportConfig.SEGMENT_MB, "2", TransportConfig.MAX_SEGMENTS, "1",
                 TransportConfig.SPILL, "0");
             Arena arena = Arena.ofShared()) {
            TensorTransport producer = sides.producer();
            TensorChannel outbox = sides.outbox();
            TensorTransport consumer = sides.consumer();
            TensorChannel inbox = sides.inbox();
            Tensor[] tensors = new Tensor[count];
            for (int i = 0; i < count; i++) {
                tensors[i] = pattern(arena, size, i);
            }
            AtomicInteger sent = new AtomicInteger();
            AtomicInteger acked = new AtomicInteger();
            Thread sender = Thread.ofPlatform().start(() -> {
                for (int i = 0; i < count; i++) {
                    outbox.sendDescriptors("decode", producer.send("r" + i, List.of(tensors[i])));
                    sent.incrementAndGet();
                    outbox.poll(ackListener(producer, acked), 64);
                }
            });
            List<String> held = new ArrayList<>(); // received, not ACKed yet: the arena stays full
            List<UUID> heldUuids = new ArrayList<>();
            TensorChannel.Listener reader = new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    for (TensorDescriptor d : batch) {
                        try (ReceivedTensor t = consumer.receive(d)) {
                            assertTrue(matches(t.data(), Integer.parseInt(d.requestId().substring(1))));
                        }
                        held.add(from);
                        heldUuids.add(d.uuid());
                    }
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            };
            int stableFor = 0;
            int last = -1;
            while (stableFor < 10) { // the sender makes no progress for a second
                inbox.poll(reader, 64);
                Thread.sleep(100);
                stableFor = sent.get() == last ? stableFor + 1 : 0;
                last = sent.get();
            }
            assertTrue(sender.isAlive() && sent.get() < count, "the sender was not held back: sent " + sent.get());
            assertTrue(held.size() < count, "received " + held.size());
            int received = held.size();
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (received < count && System.nanoTime() < deadline) { // ACK as they come: the rest flows
                inbox.sendAcks("prefill", heldUuids);
                heldUuids.clear();
                inbox.receive(reader, Duration.ofMillis(50));
                received = held.size();
            }
            inbox.sendAcks("prefill", heldUuids);
            sender.join(30_000);
            assertEquals(count, received);
            assertEquals(count, sent.get());
            while (acked.get() < count && System.nanoTime() < deadline) {
                outbox.receive(ackListener(producer, acked), Duration.ofMillis(50));
            }
            assertEquals(0, producer.statsSummary().inFlight());
            assertEquals(0, ((RoutedMailbox) inbox).remoteStats().aborted());
        }
    }

    /**
     * A batch whose later tensor cannot be written in time (the other node's arena is full and its consumer reads
     * nothing): each tensor is decided on its own. The send does not throw for the batch; the tensors from the one
     * that waited past the deadline on are told unreachable (never handed over: a definite failure), and those
     * handed over before are not (once, all of them were, so a tensor the consumer's handler saw was told a
     * definite failure and a retry handed it over twice).
     */
    @Test
    void aBatchWhoseLaterTensorCannotBeWrittenInTimeFailsOnlyTheTensorsNeverHandedOver() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Arena arena = Arena.ofShared();
             TensorTransport producer = TensorTransports.create(Deployment.of(nodes.config(true,
                 RemoteConfig.TIMEOUT_S, "2"), "pipe", "prefill"), false);
             TensorTransport consumer = TensorTransports.create(smallStrictDecode(nodes), false)) {
            RoutedMailbox outbox = (RoutedMailbox) TensorTransports.mailbox(Deployment.of(nodes.config(true,
                RemoteConfig.TIMEOUT_S, "2"), "pipe", "prefill"), producer);
            TensorChannel inbox = TensorTransports.mailbox(smallStrictDecode(nodes)); // its landings wait for room
            List<UUID> unreachable = java.util.Collections.synchronizedList(new ArrayList<>());
            outbox.onRefused(new RemoteLink.RefusalListener() {
                @Override
                public void refused(String to, long msb, long lsb, String why) {
                }

                @Override
                public void timedOut(String to, long msb, long lsb, boolean bytesLeft, String why) {
                }

                @Override
                public void unreachable(String to, long msb, long lsb, PeerUnavailableException why) {
                    unreachable.add(new UUID(msb, lsb));
                }
            });
            try {
                assertTrue(outbox.awaitPeer("decode", Duration.ofSeconds(20)));
                outbox.sendDescriptors("decode", producer.send("warm", List.of(pattern(arena, 4096, 0))));
                AtomicInteger acked = new AtomicInteger();
                long deadline = System.nanoTime() + 20_000_000_000L;
                while (acked.get() == 0 && System.nanoTime() < deadline) { // landed: the connection is up, its queue
                    outbox.receive(ackListener(producer, acked), Duration.ofMillis(50)); // empty: the batch goes directly
                }
                assertEquals(1, acked.get(), "the first tensor never landed");
                List<Tensor> batch = new ArrayList<>();
                for (int i = 0; i < 24; i++) {
                    batch.add(pattern(arena, 1 << 20, i));
                }
                List<TensorDescriptor> sent = producer.send("batch", batch);
                outbox.sendDescriptors("decode", sent); // old: PeerUnavailableException for the whole batch
                List<UUID> uuids = sent.stream().map(TensorDescriptor::uuid).toList();
                assertTrue(!unreachable.isEmpty() && unreachable.size() < uuids.size(), "some tensors were handed"
                    + " over, the rest were not: unreachable " + unreachable.size() + " of " + uuids.size());
                assertEquals(uuids.subList(uuids.size() - unreachable.size(), uuids.size()), unreachable,
                    "the tensors told unreachable are the batch's last, each once, in order");
            } finally {
                inbox.close();
                outbox.close();
            }
        }
    }

    private static Deployment smallStrictDecode(TwoNodes nodes) {
        return Deployment.of(nodes.config(false, TransportConfig.SEGMENT_MB, "2", TransportConfig.MAX_SEGMENTS, "1",
            TransportConfig.SPILL, "0"), "pipe", "decode");
    }

    static TensorChannel.Listener ackListener(TensorTransport producer, AtomicInteger acked) {
        return new TensorChannel.Listener() {
            @Override
            public void descriptors(String from, List<TensorDescriptor> batch) {
            }

            @Override
            public void acks(String from, List<UUID> uuids) {
                producer.ack(from, uuids);
                acked.addAndGet(uuids.size());
            }
        };
    }

    /**
     * A node that holds another secret, and one whose map places the sender elsewhere: awaitPeer throws
     * PeerRejectedException within seconds (not after its 60 s), naming the step that was refused, and an
     * endpoint's send fails REJECTED, not REMOTE_TIMEOUT.
     */
    @Test
    void aPeerThatRefusesOurHandshakeIsToldApartFromOneThatIsDown() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            Deployment b = Deployment.of(nodes.config(false), "pipe", "decode");
            try (TensorEndpoint consumer = TensorEndpoint.open(b)) {
                Deployment a = Deployment.of(nodes.config(true, RemoteConfig.SECRET, "another-secret-of-32-bytes-00000"),
                    "pipe", "prefill");
                try (TensorEndpoint producer = TensorEndpoint.open(a)) {
                    long start = System.nanoTime();
                    PeerRejectedException e = assertThrows(PeerRejectedException.class,
                        () -> producer.awaitPeer("decode", Duration.ofSeconds(60)));
                    long tookMs = (System.nanoTime() - start) / 1_000_000;
                    assertTrue(e.getMessage().contains("refused this node's proof"), e.getMessage());
                    assertTrue(tookMs < 10_000, "awaitPeer took " + tookMs + " ms");
                    Delivery d = producer.send("decode", "r", Tensor.of(DType.U8, MemorySegment.ofArray(new byte[64]), 64));
                    assertEquals(Delivery.Status.FAILED, d.await(Duration.ofSeconds(20)));
                    assertEquals(Delivery.Failure.REJECTED, d.failure(), d.toString());
                }
            }
        }
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            // Node B's map places prefill at an address this host does not connect from.
            Deployment b = Deployment.of(nodes.config(false, RemoteConfig.ENTITIES, "prefill=192.0.2.1:"
                + nodes.endpointA.substring(nodes.endpointA.indexOf(':') + 1) + ",decode=" + nodes.endpointB), "pipe", "decode");
            try (TensorEndpoint consumer = TensorEndpoint.open(b);
                 TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true), "pipe", "prefill"))) {
                PeerRejectedException e = assertThrows(PeerRejectedException.class,
                    () -> producer.awaitPeer("decode", Duration.ofSeconds(60)));
                assertTrue(e.getMessage().contains("before its challenge") && e.getMessage().contains(RemoteConfig.ENTITIES),
                    e.getMessage());
            }
        }
    }

    @Test
    void theMapMustPlaceThisEntityAndASecretMustBeSet() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            Deployment stranger = Deployment.of(nodes.config(true), "pipe", "tokenizer");
            ConfigurationException e = assertThrows(ConfigurationException.class, () -> TensorTransports.mailbox(stranger));
            assertTrue(e.getMessage().contains("does not place entity=tokenizer"), e.getMessage());
            Deployment noSecret = Deployment.of(nodes.config(true, RemoteConfig.SECRET, ""), "pipe", "prefill");
            e = assertThrows(ConfigurationException.class, () -> TensorTransports.mailbox(noSecret));
            assertTrue(e.getMessage().contains(RemoteConfig.SECRET_FILE) && e.getMessage().contains(RemoteConfig.INSECURE),
                e.getMessage());
        }
    }

    /** A producer on node A and a consumer on node B, each with its transport and mailbox, connected. */
    private record Sides(TensorTransport producer, TensorChannel outbox, TensorTransport consumer, TensorChannel inbox)
        implements AutoCloseable {
        static Sides open(TwoNodes nodes, String... nodeB) throws InterruptedException {
            Deployment a = Deployment.of(nodes.config(true), "pipe", "prefill");
            Deployment b = Deployment.of(nodes.config(false, nodeB), "pipe", "decode");
            TensorTransport producer = TensorTransports.create(a, false);
            TensorChannel outbox = TensorTransports.mailbox(a, producer);
            TensorTransport consumer = TensorTransports.create(b, false);
            Sides sides = new Sides(producer, outbox, consumer, TensorTransports.mailbox(b));
            assertTrue(outbox.awaitPeer("decode", Duration.ofSeconds(20)), "decode's endpoint never connected");
            return sides;
        }

        @Override
        public void close() {
            inbox.close();
            consumer.close();
            outbox.close();
            producer.close();
        }
    }

    static Tensor pattern(Arena arena, long bytes, int seq) {
        MemorySegment data = arena.allocate(bytes, 64);
        for (long i = 0; i < bytes; i++) {
            data.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + seq));
        }
        return Tensor.of(DType.U8, data, bytes);
    }

    static boolean matches(MemorySegment data, int seq) {
        for (long i = 0; i < data.byteSize(); i++) {
            if (data.get(ValueLayout.JAVA_BYTE, i) != (byte) (i * 31 + seq)) {
                return false;
            }
        }
        return true;
    }

    private static void pump(TensorChannel channel, TensorChannel.Listener listener, java.util.function.BooleanSupplier done) {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "nothing arrived in 30 s");
            channel.receive(listener, Duration.ofMillis(50));
        }
    }
}
