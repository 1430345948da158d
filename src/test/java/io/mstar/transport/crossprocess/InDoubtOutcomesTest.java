package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.TwoNodes;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A tensor's outcome across nodes tells the truth, and a retry is safe. A consumer's node that hands tensors over and never confirms
 * them (its LANDED lost: {@code -Dmstar.test.noLanded}) makes each one {@code IN_DOUBT}, not a definite failure,
 * and its handler did see each; a node where nobody serves the entity makes each a definite
 * {@code REMOTE_TIMEOUT}, and no handler saw any. No tensor told a definite failure was seen by a handler. A
 * producer that reposts every in-doubt tensor ({@code TensorEndpoint.repost}) has each handed over once: the
 * receiver's duplicate window confirms the repeat without handing it over (and without the window, twice).
 */
@Tag("long")
class InDoubtOutcomesTest {
    private static final int HANDED = 20;
    private static final int NEVER_LEFT = 5;

    @Test
    void aTensorHandedOverButNotConfirmedIsInDoubtAndOneThatNeverLeftIsADefiniteFailure() throws Exception {
        Path work = Files.createTempDirectory("mstar-indoubt-");
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            Path received = work.resolve("received");
            Path stop = work.resolve("stop");
            ChildJvm consumer = ChildJvm.start(true, List.of("-Dmstar.test.noLanded=true"),
                nodes.env(false, RemoteConfig.TIMEOUT_S, "1"), RemoteNode.class, "consumer", received.toString(),
                stop.toString());
            List<Delivery> deliveries = new ArrayList<>();
            RemoteStats remote;
            try (TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S,
                     "1"), "pipe", "prefill"));
                 Arena arena = Arena.ofConfined()) {
                assertTrue(producer.awaitPeer("decode", Duration.ofSeconds(60)), consumer.state());
                MemorySegment data = arena.allocate(64 << 10, 64);
                for (int seq = 0; seq < HANDED + NEVER_LEFT; seq++) {
                    if (seq == HANDED) { // everything so far handed over; then nobody serves decode
                        for (Delivery d : deliveries) {
                            d.await(Duration.ofSeconds(30));
                        }
                        Files.createFile(stop);
                        assertEquals(0, consumer.await(60), consumer.output());
                    }
                    RemoteNode.fill(data, seq);
                    deliveries.add(producer.send("decode", "s" + seq, Tensor.of(DType.U8, data, data.byteSize())));
                }
                for (Delivery d : deliveries) {
                    assertEquals(Delivery.Status.FAILED, d.await(Duration.ofSeconds(30)), d.toString());
                }
                remote = producer.remoteStats().orElseThrow();
            }
            assertEquals(HANDED, remote.inDoubt(), remote.toLogLine());
            Set<Integer> seen = new HashSet<>();
            for (String line : Files.readAllLines(received)) {
                assertTrue(!line.startsWith("BAD"), line);
                seen.add(Integer.parseInt(line.trim()));
            }
            List<String> definiteButSeen = new ArrayList<>();
            for (int seq = 0; seq < deliveries.size(); seq++) {
                Delivery d = deliveries.get(seq);
                if (d.failure().isDefinite() && seen.contains(seq)) {
                    definiteButSeen.add("t" + seq + " " + d.failure() + ": " + d.detail());
                }
            }
            assertEquals(List.of(), definiteButSeen, "told a definite failure, yet the consumer's handler saw it");
            for (int seq = 0; seq < HANDED; seq++) {
                assertTrue(seen.contains(seq), "t" + seq + " was not handed over: " + seen);
                assertEquals(Delivery.Failure.IN_DOUBT, deliveries.get(seq).failure(), deliveries.get(seq).detail());
                assertTrue(deliveries.get(seq).detail().contains("may have been handed over"),
                    deliveries.get(seq).detail());
            }
            for (int seq = HANDED; seq < deliveries.size(); seq++) {
                assertEquals(Delivery.Failure.REMOTE_TIMEOUT, deliveries.get(seq).failure(), deliveries.get(seq).detail());
            }
            consumer.deleteLog();
        } finally {
            ShmTestDir.deleteTree(work);
        }
    }

    @Test
    void aProducerThatRepostsEveryInDoubtTensorHasEachHandedOverOnce() throws Exception {
        Map<Integer, Integer> seen = repostEveryInDoubt(List.of(), 0);
        for (int seq = 0; seq < HANDED; seq++) {
            assertEquals(1, seen.getOrDefault(seq, 0), "t" + seq + " handed over " + seen.get(seq) + " times: " + seen);
        }
    }

    /**
     * As a partition longer than the window does (a clean-clone run of the cross-node campaign handed a tensor
     * over twice after its 30 s partition): the producer is silent for 8 s, past the 6 s window on the clock,
     * before it reposts. The window runs on the sender's time, where a silence counts one timeout: each once.
     */
    @Test
    void repostsAfterASilenceLongerThanTheWindowAreStillHandedOverOnce() throws Exception {
        Map<Integer, Integer> seen = repostEveryInDoubt(List.of(), 8_000);
        for (int seq = 0; seq < HANDED; seq++) {
            assertEquals(1, seen.getOrDefault(seq, 0), "t" + seq + " handed over " + seen.get(seq) + " times: " + seen);
        }
    }

    /** The window's negative control: without it, each repost reaches the handler a second time. */
    @Test
    void withoutTheReceiversDuplicateWindowEachRepostIsHandedOverAgain() throws Exception {
        Map<Integer, Integer> seen = repostEveryInDoubt(List.of("-Dmstar.test.noDuplicateWindow=true"), 0);
        for (int seq = 0; seq < HANDED; seq++) {
            assertEquals(2, seen.getOrDefault(seq, 0), "t" + seq + ": " + seen);
        }
    }

    /**
     * Posts {@value #HANDED} tensors to a consumer's node that confirms no first send, reposts each one told
     * {@code IN_DOUBT} (from the producer's thread, as a user would) until it is delivered; returns how many times
     * the consumer's handler saw each. With {@code silenceMs}, the first reposts wait until every tensor is in doubt,
     * then that long.
     */
    private static Map<Integer, Integer> repostEveryInDoubt(List<String> consumerFlags, long silenceMs)
        throws Exception {
        Path work = Files.createTempDirectory("mstar-repost-");
        try (TwoNodes nodes = new TwoNodes("prefill", "decode")) {
            Path received = work.resolve("received");
            Path stop = work.resolve("stop");
            List<String> flags = new ArrayList<>(consumerFlags);
            flags.add("-Dmstar.test.noLanded=true");
            ChildJvm consumer = ChildJvm.start(true, flags, nodes.env(false, RemoteConfig.TIMEOUT_S, "1"),
                RemoteNode.class, "consumer", received.toString(), stop.toString());
            BlockingQueue<long[]> outcomes = new LinkedBlockingQueue<>(); // lsb, msb, failure ordinal or -1
            DeliveryListener listener = new DeliveryListener() {
                @Override
                public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                    outcomes.add(new long[] {uuidLsb, uuidMsb, -1});
                }

                @Override
                public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure,
                                   String detail) {
                    outcomes.add(new long[] {uuidLsb, uuidMsb, failure.ordinal()});
                }
            };
            Map<Long, Integer> seqOf = new HashMap<>();
            int reposts = 0;
            RemoteStats remote;
            try (TensorEndpoint producer = TensorEndpoint.open(Deployment.of(nodes.config(true, RemoteConfig.TIMEOUT_S,
                     "1"), "pipe", "prefill"), listener);
                 Arena arena = Arena.ofConfined()) {
                assertTrue(producer.awaitPeer("decode", Duration.ofSeconds(60)), consumer.state());
                List<Tensor> tensors = new ArrayList<>();
                for (int seq = 0; seq < HANDED; seq++) {
                    MemorySegment data = arena.allocate(64 << 10, 64);
                    RemoteNode.fill(data, seq);
                    tensors.add(Tensor.of(DType.U8, data, data.byteSize()));
                    seqOf.put(producer.post("decode", "s" + seq, tensors.get(seq)), seq);
                }
                int delivered = 0;
                List<long[]> held = new ArrayList<>(); // in-doubt outcomes held back for the silence
                while (delivered < HANDED) {
                    long[] o = outcomes.poll(60, TimeUnit.SECONDS);
                    if (o == null) { // the consumer's state only then: a jstack per outcome paced the reposts
                        fail("no outcome for 60 s; delivered " + delivered + ": " + consumer.state());
                    }
                    int seq = seqOf.get(o[0]);
                    if (o[2] < 0) {
                        delivered++;
                        continue;
                    }
                    assertEquals(Delivery.Failure.IN_DOUBT, Delivery.Failure.values()[(int) o[2]], "t" + seq);
                    held.add(o);
                    if (silenceMs > 0 && reposts == 0 && held.size() < HANDED) {
                        continue;
                    }
                    if (silenceMs > 0 && reposts == 0) {
                        Thread.sleep(silenceMs);
                    }
                    for (long[] h : held) {
                        int s = seqOf.get(h[0]);
                        seqOf.put(producer.repost("decode", "s" + s, tensors.get(s), h[1], h[0]), s);
                        reposts++;
                    }
                    held.clear();
                }
                remote = producer.remoteStats().orElseThrow();
            }
            Files.createFile(stop);
            assertEquals(0, consumer.await(60), consumer.output());
            assertEquals(HANDED, reposts, remote.toLogLine());
            assertEquals(HANDED, remote.inDoubt(), remote.toLogLine());
            Map<Integer, Integer> seen = new TreeMap<>();
            for (String line : Files.readAllLines(received)) {
                assertTrue(!line.startsWith("BAD"), line);
                seen.merge(Integer.parseInt(line.trim()), 1, Integer::sum);
            }
            String duplicates = consumerFlags.isEmpty() ? "remoteDuplicates=" + HANDED : "remoteDuplicates=0";
            assertTrue(consumer.output().contains(duplicates), consumer.output());
            consumer.deleteLog();
            return seen;
        } finally {
            ShmTestDir.deleteTree(work);
        }
    }
}
