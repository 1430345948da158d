package io.mstar.transport.remote;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.remote.HostilePeerTest.Attacker;
import io.mstar.transport.remote.HostilePeerTest.Victim;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static io.mstar.transport.remote.HostilePeerTest.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A member of the deployment (it holds the secret) or a local process without it, each trying to stop a node
 * with what every cap used to leave uncounted: tensors that cost no bytes, one header larger than the budget,
 * idle connections in an entity's name, handshakes dribbled from the producer's own address. The node's open
 * files stay bounded, nothing is committed beyond the budget, and the honest producer gets through.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class NodeCapsTest {
    private static final int TENSOR_CAP = 256;
    private static final int FLOOD = 100_000;

    /** The map of the two nodes, plus {@code mallory} (a member gone bad) on this host too. */
    private static String entitiesWithMallory(TwoNodes nodes) throws IOException {
        return "prefill=" + nodes.endpointA + ",decode=" + nodes.endpointB + ",mallory=127.0.0.1:"
            + TwoNodes.freePorts()[0];
    }

    /**
     * 10^5 zero-byte tensors from a member that never reads its replies, to a node that lands each in a file
     * of its own (the file transport) and whose consumer never ACKs them: the node holds at most {@code
     * MSTAR_REMOTE_MAX_INFLIGHT_TENSORS} of them (each an open file), stops reading the member when its replies
     * pile up, delivers the honest producer's tensors meanwhile, and leaves no file after its close.
     */
    @Test
    void aFloodOfEmptyTensorsHoldsNoMoreFilesThanTheTensorCapAndTheHonestGetThrough() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Arena arena = Arena.ofShared()) {
            String entities = entitiesWithMallory(nodes);
            int filesBefore = openFiles();
            AtomicLong maxFiles = new AtomicLong();
            AtomicInteger flooded = new AtomicInteger();
            AtomicInteger honest = new AtomicInteger();
            try (Victim victim = Victim.open(nodes, "10", RemoteConfig.ENTITIES, entities, TransportConfig.ARENA, "0",
                     RemoteConfig.MAX_INFLIGHT_TENSORS, Integer.toString(TENSOR_CAP));
                 Attacker mallory = new Attacker(victim.port()).authenticated("mallory")) {
                AtomicBoolean stop = new AtomicBoolean();
                Thread flood = Thread.ofPlatform().start(() -> {
                    try {
                        for (int i = 0; i < FLOOD && !stop.get(); i++) {
                            mallory.send(Attacker.tensorHeader(2L * i + 1000, 0, new long[] {0}, DType.U8, "empty", 0));
                            flooded.incrementAndGet();
                        }
                    } catch (IOException closed) {
                        // the test is over
                    }
                });
                Deployment a = Deployment.of(nodes.config(true, RemoteConfig.ENTITIES, entities), "pipe", "prefill");
                try (TensorTransport producer = TensorTransports.create(a, false);
                     TensorChannel outbox = TensorTransports.mailbox(a, producer)) {
                    Tensor tensor = RemoteLinkTest.pattern(arena, 4096, 5);
                    long end = System.nanoTime() + 8_000_000_000L;
                    int sent = 0;
                    while (System.nanoTime() < end && honest.get() < 20) {
                        if (sent == honest.get()) {
                            outbox.sendDescriptors("decode", producer.send("honest", List.of(tensor)));
                            sent++;
                        }
                        victim.inbox().receive(new TensorChannel.Listener() {
                            @Override
                            public void descriptors(String from, List<TensorDescriptor> batch) {
                                if (!from.equals("prefill")) {
                                    return; // a consumer too busy for mallory's: never ACKed
                                }
                                for (TensorDescriptor d : batch) {
                                    try (ReceivedTensor t = victim.consumer().receive(d)) {
                                        assertTrue(RemoteLinkTest.matches(t.data(), 5));
                                    }
                                }
                                victim.inbox().sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                                honest.addAndGet(batch.size());
                            }

                            @Override
                            public void acks(String from, List<UUID> uuids) {
                            }
                        }, Duration.ofMillis(20));
                        maxFiles.accumulateAndGet(openFiles(), Math::max);
                        outbox.receive(RemoteLinkTest.ackListener(producer, new AtomicInteger()), Duration.ZERO);
                    }
                    Thread.sleep(500);
                    maxFiles.accumulateAndGet(openFiles(), Math::max);
                }
                stop.set(true);
                mallory.close();
                flood.join(10_000);
                long held = ShmFiles.count(nodes.dirB);
                System.out.printf("flood: %d empty tensors written by mallory, %d honest delivered, open files %d"
                    + " before, %d at most (cap %d tensors), %d files in node B's directory; %s%n", flooded.get(),
                    honest.get(), filesBefore, maxFiles.get(), TENSOR_CAP, held, victim.stats().toLogLine());
                assertEquals(20, honest.get(), "the honest producer's tensors were held up");
                assertTrue(maxFiles.get() - filesBefore < TENSOR_CAP + 100, "open files grew from " + filesBefore
                    + " to " + maxFiles.get() + " (cap " + TENSOR_CAP + " tensors)");
            }
        } // TwoNodes' close fails when a file is left in either directory
    }

    /** One TENSOR header of 232 MiB, against a budget of 8 MiB: refused before a byte is committed. */
    @Test
    void aHeaderLargerThanTheBudgetCommitsNothing() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode");
             Victim victim = Victim.open(nodes, "10", RemoteConfig.MAX_INFLIGHT_MB, "8", TransportConfig.ARENA, "0");
             Attacker a = new Attacker(victim.port()).authenticated("prefill")) {
            long availableBefore = Posix.statvfs(nodes.dirB.toString()).availableBytes();
            a.send(Attacker.tensorHeader(232L << 20, new long[] {232L << 20}, DType.U8, "huge", 0));
            byte[] reply = a.readFrame();
            assertTrue(reply != null && reply[0] == RemoteProtocol.REFUSED, "no REFUSED for the huge header");
            assertEquals(RemoteProtocol.Refusal.TOO_LARGE.code(), reply[reply.length - 1]);
            long committed = availableBefore - Posix.statvfs(nodes.dirB.toString()).availableBytes();
            assertTrue(committed < (1 << 20), committed + " bytes were committed for a refused tensor");
            assertEquals(0, victim.inbox().link().landingBytes());
            a.send(new byte[1 << 16]); // its bytes may follow all the same: skipped
            assertEquals(0, victim.delivered(200));
        }
    }

    /** Four connections opened in the honest producer's name and left idle do not keep it out. */
    @Test
    void idleConnectionsInAnEntitysNameDoNotLockItOut() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes, "10");
             Arena arena = Arena.ofShared()) {
            List<Attacker> idle = new ArrayList<>();
            for (int i = 0; i < ConnectionGate.MAX_CONNECTIONS_PER_SENDER; i++) {
                idle.add(new Attacker(victim.port()).authenticated("prefill"));
            }
            long start = System.nanoTime();
            Deployment a = Deployment.of(nodes.config(true), "pipe", "prefill");
            try (TensorTransport producer = TensorTransports.create(a, false);
                 TensorChannel outbox = TensorTransports.mailbox(a, producer)) {
                outbox.sendDescriptors("decode", producer.send("honest", List.of(RemoteLinkTest.pattern(arena, 4096, 9))));
                waitFor(() -> victim.delivered(50) == 1, "the honest producer was locked out");
            }
            System.out.printf("honest tensor delivered %d ms after 4 idle connections in its name%n",
                (System.nanoTime() - start) / 1_000_000);
            for (Attacker x : idle) {
                x.close();
            }
        }
    }

    /**
     * 60 connections from the producer's own address, each dribbling a HELLO a byte at a time and opening
     * again when closed: three fresh honest producers each get a tensor through within two seconds.
     */
    @Test
    void slowHandshakesFromTheProducersOwnAddressDoNotKeepItOut() throws Exception {
        try (TwoNodes nodes = new TwoNodes("prefill", "decode"); Victim victim = Victim.open(nodes, "10");
             Arena arena = Arena.ofShared()) {
            AtomicBoolean stop = new AtomicBoolean();
            AtomicInteger opened = new AtomicInteger();
            List<Thread> slow = new ArrayList<>();
            for (int i = 0; i < 60; i++) {
                slow.add(Thread.ofPlatform().daemon().start(() -> {
                    while (!stop.get()) {
                        try (Attacker s = new Attacker(victim.port())) {
                            opened.incrementAndGet();
                            byte[] hello = s.hello("prefill");
                            for (int k = 0; k < hello.length - 1 && !stop.get(); k++) {
                                s.send(new byte[] {hello[k]});
                                Thread.sleep(300);
                            }
                        } catch (IOException | InterruptedException closed) {
                            // refused or evicted: open another
                        }
                    }
                }));
            }
            Thread.sleep(1500); // the table is full of them
            long worstMs = 0;
            for (int round = 0; round < 3; round++) {
                long start = System.nanoTime();
                Deployment a = Deployment.of(nodes.config(true), "pipe", "prefill");
                try (TensorTransport producer = TensorTransports.create(a, false);
                     TensorChannel outbox = TensorTransports.mailbox(a, producer)) {
                    outbox.sendDescriptors("decode", producer.send("honest",
                        List.of(RemoteLinkTest.pattern(arena, 4096, 11))));
                    waitFor(() -> victim.delivered(20) == 1, "an honest producer was kept out");
                }
                worstMs = Math.max(worstMs, (System.nanoTime() - start) / 1_000_000);
            }
            stop.set(true);
            for (Thread t : slow) {
                t.join(2000);
            }
            System.out.printf("3 fresh honest producers through 60 slow handshakes from their address (%d opened):"
                + " worst %d ms; %s%n", opened.get(), worstMs, victim.stats().toLogLine());
            assertTrue(worstMs < 2500, "an honest producer waited " + worstMs + " ms");
        }
    }

    private static int openFiles() {
        try (var fds = Files.list(Path.of("/proc/self/fd"))) {
            return (int) fds.count();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Files in a directory. */
    private static final class ShmFiles {
        static long count(Path dir) throws IOException {
            try (var files = Files.list(dir)) {
                return files.count();
            }
        }
    }
}
