package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.StaleTensorException;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.liveness.SlotHolds;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The reuse rule: a slot is reused only when nothing can still read or send it (shares per consumer
 * incarnation, holds), and a slot reused anyway is refused by its reader (the stamp), never handed over.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ReuseRuleTest {
    private static final Namespace NS = Namespace.of(null, "reuse-rule-test");
    private static final long SEGMENT = 1 << 20;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private ArenaTransport transport(String entity) {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString())::get);
        return new ArenaTransport(config, new SegmentedArena(shm.path(), NS, entity, SEGMENT, 2), false);
    }

    private static Tensor filled(int bytes, int value) {
        MemorySegment data = MemorySegment.ofArray(new byte[bytes]);
        data.fill((byte) value);
        return Tensor.of(DType.U8, data, bytes);
    }

    /**
     * The race a restart during a fan-out met: the liveness check took the bare name "sink" for dead (its old
     * incarnation was gone, the new one not yet mapped), then the new incarnation got the tensor, then the
     * check dropped the share it still keyed by that name and freed the slot under the new reader. A share is
     * now judged only once it belongs to an incarnation.
     */
    @Test
    void aLivenessCheckRacingARestartNeverReleasesAShareNotYetDeliveredToAnIncarnation() {
        try (ArenaTransport producer = transport("p")) {
            List<TensorDescriptor> sent = producer.send("t-580", List.of(filled(65536, 1)), List.of("sink", "sink2"));
            UUID uuid = sent.getFirst().uuid();
            ConsumerWatch watch = (ConsumerWatch) producer.capability(ConsumerLiveness.class).orElseThrow();
            watch.sentTo("sink2@2", List.of(uuid));
            producer.ack("sink2", List.of(uuid)); // sink2 is done: sink's share is the last one
            Set<String> live = Set.of("sink2@2", "sink@b"); // "sink@a" died; "sink" alone names no live incarnation
            watch.watch(live::contains);

            assertEquals(0, watch.releaseFromDeadConsumers(), "a check between the send and the delivery");
            watch.sentTo("sink@b", List.of(uuid)); // the new incarnation has it now
            assertEquals(0, watch.releaseFromDeadConsumers(), "the new incarnation lives");
            assertEquals(1, producer.statsSummary().inFlight(), "the slot is still the tensor's");

            producer.ack("sink", List.of(uuid));
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    @Test
    void aShareOfADeadIncarnationIsReleasedAndItsLastShareFreesTheSlot() {
        try (ArenaTransport producer = transport("p")) {
            UUID uuid = producer.send("r", List.of(filled(4096, 1)), List.of("sink", "sink2")).getFirst().uuid();
            ConsumerWatch watch = (ConsumerWatch) producer.capability(ConsumerLiveness.class).orElseThrow();
            watch.sentTo("sink@a", List.of(uuid));
            watch.sentTo("sink2@2", List.of(uuid));
            producer.ack("sink2", List.of(uuid));
            watch.watch(Set.of("sink2@2", "sink@b")::contains); // sink@a died; sink@b took its place

            assertEquals(1, watch.releaseFromDeadConsumers());
            assertEquals(0, producer.statsSummary().inFlight());
        }
    }

    /** A reader that finds its slot reused refuses it; the bytes it would have handed over were another tensor's. */
    @Test
    void aSlotFreedAndReusedUnderItsReaderIsRefusedNotHandedOver() {
        try (ArenaTransport producer = transport("p"); ArenaTransport consumer = transport("c")) {
            TensorDescriptor first = producer.send("first", List.of(filled(65536, 1))).getFirst();
            producer.freeSlotUnderReader(first.uuid()); // a bug frees it while the consumer has yet to read it
            TensorDescriptor second = producer.send("second", List.of(filled(65536, 2))).getFirst();
            assertEquals(first.offset(), second.offset(), "the slot freed last comes back first");

            assertThrows(StaleTensorException.class, () -> consumer.receive(first));
            MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
            int length = DescriptorCodec.encode(first, record, 0);
            AtomicInteger handed = new AtomicInteger();
            assertThrows(StaleTensorException.class, () -> consumer.receive(record, 0, length,
                (memory, offset, nbytes) -> handed.incrementAndGet()));
            assertEquals(0, handed.get(), "refused before the reader saw a byte");
            assertEquals(2, consumer.statsSummary().staleReads());

            // Negative control: what the check refused. Read without it, the descriptor's bytes are the second tensor's.
            try (ReceivedTensor raw = consumer.receive(second)) {
                assertEquals(2, raw.data().get(ValueLayout.JAVA_BYTE, 0));
                assertNotEquals(first.uuid(), second.uuid());
            }
        }
    }

    /** A slot reused while its reader runs: refused when the reader returns, and on close of a kept view. */
    @Test
    void aSlotReusedWhileItIsReadIsRefusedAfterTheRead() {
        try (ArenaTransport producer = transport("p"); ArenaTransport consumer = transport("c")) {
            TensorDescriptor first = producer.send("first", List.of(filled(4096, 1))).getFirst();
            MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
            int length = DescriptorCodec.encode(first, record, 0);
            assertThrows(StaleTensorException.class, () -> consumer.receive(record, 0, length, (memory, offset, nbytes) -> {
                producer.freeSlotUnderReader(first.uuid());
                producer.send("second", List.of(filled(4096, 2)));
            }));
            assertEquals(1, consumer.statsSummary().staleReads());
        }
    }

    /** A hold (a network write not yet done) keeps a released slot from reuse until it is closed. */
    @Test
    void aHeldSlotIsFreedOnlyWhenItsLastHoldCloses() {
        try (ArenaTransport producer = transport("p"); ArenaTransport consumer = transport("c")) {
            TensorDescriptor first = producer.send("first", List.of(filled(65536, 1))).getFirst();
            SlotHolds holds = producer.capability(SlotHolds.class).orElseThrow();
            SlotHolds.Hold hold = holds.hold(first.uuid().getMostSignificantBits(), first.uuid().getLeastSignificantBits());
            producer.ack(List.of(first.uuid())); // its consumer is done (or timed out): the write still reads it
            TensorDescriptor second = producer.send("second", List.of(filled(65536, 2))).getFirst();
            assertNotEquals(first.offset(), second.offset(), "a held slot is not reused");
            try (ReceivedTensor held = consumer.receive(first)) {
                assertEquals(1, held.data().get(ValueLayout.JAVA_BYTE, 65535));
            }
            hold.close();
            hold.close(); // harmless
            producer.ack(List.of(second.uuid()));
            TensorDescriptor third = producer.send("third", List.of(filled(65536, 3))).getFirst();
            assertTrue(third.offset() == first.offset() || third.offset() == second.offset(), "freed once let go");
            assertEquals(1, producer.statsSummary().inFlight());
        }
    }

    /** Through the endpoints: the consumer refuses the reused slot's tensor and its producer is told. */
    @Test
    void theProducerIsToldWhenItsConsumerRefusesAReusedSlot() throws Exception {
        Map<String, String> env = new HashMap<>(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2"));
        TransportConfig config = TransportConfig.from(env::get);
        try (TensorEndpoint consumer = TensorEndpoint.open(Deployment.of(config, "reuse-rule-test", "c"));
             TensorEndpoint producer = TensorEndpoint.open(Deployment.of(config, "reuse-rule-test", "p"))) {
            TensorClaim claim = producer.claim("first", DType.U8, 65536);
            claim.memory().fill((byte) 1);
            UUID uuid = claim.uuid();
            Delivery delivery = producer.send("c", claim);
            ArenaTransport transport = (ArenaTransport) producer.transport();
            transport.freeSlotUnderReader(uuid);
            transport.send("second", List.of(filled(65536, 2))); // takes the slot, never sent to anyone
            AtomicInteger handled = new AtomicInteger();
            consumer.receive(tensor -> handled.incrementAndGet(), Duration.ofSeconds(5));

            assertEquals(Delivery.Status.FAILED, delivery.await(Duration.ofSeconds(10)));
            assertEquals(Delivery.Failure.REFUSED, delivery.failure());
            assertTrue(delivery.detail().contains("reused"), delivery.detail());
            assertEquals(0, handled.get(), "the handler never saw the other tensor's bytes");
            assertEquals(1, consumer.transport().statsSummary().staleReads());
        }
    }
}
