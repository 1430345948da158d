package io.mstar.transport.channel;

import io.mstar.transport.DType;
import io.mstar.transport.Placement;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.EntityInUseException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.posix.RangeLocks;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ShmMailboxTest {
    private static final Namespace NS = Namespace.of(null, "mailbox-test");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    /** Collects what a mailbox delivers. */
    static final class Inbox implements TensorChannel.Listener {
        final List<TensorDescriptor> descriptors = new ArrayList<>();
        final List<UUID> acks = new ArrayList<>();
        final List<String> senders = new ArrayList<>();

        @Override
        public void descriptors(String fromEntity, List<TensorDescriptor> batch) {
            senders.add(fromEntity);
            descriptors.addAll(batch);
        }

        @Override
        public void acks(String fromEntity, List<UUID> uuids) {
            senders.add(fromEntity);
            acks.addAll(uuids);
        }
    }

    private static TensorDescriptor descriptor(int i) {
        return new TensorDescriptor(new UUID(i, ~i), "request-" + i, "producer", DType.F16, new long[] {i % 7, 3},
            (i % 7) * 3 * 2L, Placement.ARENA, ShmNames.segment(NS, "producer", "00c0ffee", i % 3), 256L * i);
    }

    /**
     * A sender of the test's own, registered in the last writer slot as ShmMailbox's senders are: its
     * descriptor holds the slot's lock until closed (the writer's death).
     */
    private static int registeredWriter(MappedSegment raw) {
        int writer = Posix.open(raw.path(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
        long slot = MailboxDescriptor.writerSlotOffset(MailboxDescriptor.WRITERS - 1);
        assertTrue(RangeLocks.tryLock(writer, slot, 1, raw.path()));
        raw.memory().set(ValueLayout.JAVA_BYTE, slot, (byte) 1);
        return writer;
    }

    private static void drain(ShmMailbox box, Inbox inbox, int expectedMessages) {
        int messages = 0;
        while (messages < expectedMessages) {
            messages += box.receive(inbox, Duration.ofSeconds(5));
        }
    }

    // The consumer's mailbox file mapped writable, as a sender maps it: to stage what a writer leaves behind.
    private MappedSegment consumersMailboxFile() {
        return MappedSegment.openPeer(shm.path(), ShmNames.mailbox(NS, "consumer"), MailboxDescriptor.FILE_BYTES, true);
    }

    // Receives until the inbox holds `count` descriptors; fails when that takes 10 s.
    private static void awaitDescriptors(ShmMailbox box, Inbox inbox, int count, String blocked) {
        long start = System.nanoTime();
        while (inbox.descriptors.size() < count) {
            box.receive(inbox, Duration.ofSeconds(1));
            assertTrue(System.nanoTime() - start < 10_000_000_000L, blocked);
        }
    }

    @Test
    void carriesDescriptorBatchesAndAcksBothWays() {
        try (ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"));
             ShmMailbox consumer = ShmMailbox.open(shm.deployment("mailbox-test", "consumer"))) {
            List<TensorDescriptor> batch = new ArrayList<>();
            for (int i = 0; i < 3000; i++) {
                batch.add(descriptor(i)); // several ring messages' worth
            }
            producer.sendDescriptors("consumer", batch);
            Inbox atConsumer = new Inbox();
            while (atConsumer.descriptors.size() < batch.size()) {
                consumer.receive(atConsumer, Duration.ofSeconds(5));
            }
            assertEquals(batch, atConsumer.descriptors);
            assertTrue(atConsumer.senders.size() > 1 && atConsumer.senders.stream().allMatch("producer"::equals));

            consumer.sendAcks("producer", batch.stream().map(TensorDescriptor::uuid).toList());
            Inbox atProducer = new Inbox();
            while (atProducer.acks.size() < batch.size()) {
                producer.receive(atProducer, Duration.ofSeconds(5));
            }
            assertEquals(batch.stream().map(TensorDescriptor::uuid).toList(), atProducer.acks);
            assertEquals(0, producer.badMessages() + consumer.badMessages());
        }
        assertEquals(List.of(), ShmTestDir.list(shm.path()), "closing removes the mailboxes");
    }

    @Test
    void aHostileMessageIsCountedAndTheNextOneStillArrives() {
        try (ShmMailbox consumer = ShmMailbox.open(shm.deployment("mailbox-test", "consumer"));
             ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"));
             MappedSegment raw = consumersMailboxFile()) {
            ManyToOneRingBuffer ring = new ManyToOneRingBuffer(new UnsafeBuffer(raw.memory().address(), MailboxDescriptor.RING_FILE_BYTES));
            byte[] garbage = {8, 'p', 'r', 'o', 'd', 'u', 'c', 'e', 'r', 1, 0, 'x', 'y'};
            assertTrue(ring.write(MailboxMessage.DESCRIPTORS, new UnsafeBuffer(garbage), 0, garbage.length));
            producer.sendDescriptors("consumer", List.of(descriptor(1)));
            Inbox inbox = new Inbox();
            drain(consumer, inbox, 2);
            assertEquals(List.of(descriptor(1)), inbox.descriptors);
            assertEquals(1, consumer.badMessages());
        }
    }

    /**
     * A registered sender that claimed a record and stalls (GC, SIGSTOP) keeps it for the bound; once it
     * dies (its slot lock dropped), the record is skipped and what follows arrives.
     */
    @Test
    void aRecordOfASlowWriterIsKeptAndOneOfADeadWriterIsSkipped() throws Exception {
        try (ShmMailbox consumer = ShmMailbox.open(shm.deployment("mailbox-test", "consumer"));
             ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"));
             MappedSegment raw = consumersMailboxFile()) {
            int writer = registeredWriter(raw);
            ManyToOneRingBuffer ring = new ManyToOneRingBuffer(new UnsafeBuffer(raw.memory().address(),
                MailboxDescriptor.RING_FILE_BYTES));
            assertTrue(ring.tryClaim(MailboxMessage.DESCRIPTORS, 100) >= 0); // claimed, and the writer stalls
            producer.sendDescriptors("consumer", List.of(descriptor(2)));
            Inbox inbox = new Inbox();
            long start = System.nanoTime();
            while (System.nanoTime() - start < (ShmMailbox.STUCK_CLAIM_MS - 500) * 1_000_000L) {
                consumer.receive(inbox, Duration.ofMillis(50));
            }
            assertEquals(List.of(), inbox.descriptors, "a stalled writer's record is kept, and what follows waits");
            assertEquals(0, consumer.unblocks());

            Posix.close(writer, raw.path()); // the writer dies: the kernel drops its slot lock
            awaitDescriptors(consumer, inbox, 1, "the ring stayed blocked after its writer died");
            assertEquals(List.of(descriptor(2)), inbox.descriptors);
            assertEquals(1, consumer.unblocks());

            // A writer that dies right after its claim, before the receiver even saw the ring stuck.
            int doomed = registeredWriter(raw);
            assertTrue(ring.tryClaim(MailboxMessage.DESCRIPTORS, 100) >= 0);
            Posix.close(doomed, raw.path());
            producer.sendDescriptors("consumer", List.of(descriptor(3)));
            awaitDescriptors(consumer, inbox, 2, "the ring stayed blocked");
            assertEquals(List.of(descriptor(2), descriptor(3)), inbox.descriptors);
            assertEquals(2, consumer.unblocks());
        }
    }

    /**
     * A writer that lives and never commits its claim (stopped for good, or buggy), and one that commits a
     * zero length over a zero-filled record: each holds the ring for the bound, then is skipped (logged) and
     * what follows arrives. Without the bound the ring waits for good.
     */
    @Test
    void aClaimALiveWriterNeverCommitsIsSkippedAfterTheBound() throws Exception {
        try (ShmMailbox consumer = ShmMailbox.open(shm.deployment("mailbox-test", "consumer"));
             ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"));
             MappedSegment raw = consumersMailboxFile()) {
            int writer = registeredWriter(raw); // lives throughout
            ManyToOneRingBuffer ring = new ManyToOneRingBuffer(new UnsafeBuffer(raw.memory().address(),
                MailboxDescriptor.RING_FILE_BYTES));
            Inbox inbox = new Inbox();
            for (int round = 0; round < 2; round++) {
                int index = ring.tryClaim(MailboxMessage.DESCRIPTORS, 100);
                assertTrue(index >= 0);
                if (round == 1) { // a zero length committed over zeros: reads exactly like a claim not yet written
                    ring.buffer().putIntRelease(index - 8, 0);
                }
                producer.sendDescriptors("consumer", List.of(descriptor(10 + round)));
                long start = System.nanoTime();
                awaitDescriptors(consumer, inbox, round + 1, "the ring stayed blocked by a live writer's claim");
                long waitedMs = (System.nanoTime() - start) / 1_000_000;
                assertTrue(waitedMs >= ShmMailbox.STUCK_CLAIM_MS - 200, "skipped too soon: " + waitedMs + " ms");
                assertEquals(round + 1, consumer.unblocks());
            }
            assertEquals(List.of(descriptor(10), descriptor(11)), inbox.descriptors);
            Posix.close(writer, raw.path());
        }
    }

    /**
     * A writer that died after moving the tail and before writing its record's header, with its claim running
     * to the ring's end (what follows wrapped to the start): Agrona's unblock finds no header to skip to, so
     * the mailbox pads the claim away itself, and what follows arrives.
     */
    @Test
    void aHeaderlessClaimRunningToTheRingsEndIsSkippedOnceItsWriterDied() throws Exception {
        try (ShmMailbox consumer = ShmMailbox.open(shm.deployment("mailbox-test", "consumer"));
             ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"));
             MappedSegment raw = consumersMailboxFile()) {
            AtomicBuffer buffer = new UnsafeBuffer(raw.memory().address(), MailboxDescriptor.RING_FILE_BYTES);
            ManyToOneRingBuffer ring = new ManyToOneRingBuffer(buffer);
            int capacity = ring.capacity();
            Inbox inbox = new Inbox();
            long record = 0;
            while (ring.producerPosition() + 3 * record < capacity) { // traffic, read, until the lap's end is near
                long before = ring.producerPosition();
                producer.sendDescriptors("consumer", List.of(descriptor(0)));
                record = ring.producerPosition() - before;
                drain(consumer, inbox, 1);
            }
            inbox.descriptors.clear();
            int writer = registeredWriter(raw);
            buffer.putLongOrdered(capacity + RingBufferDescriptor.TAIL_POSITION_OFFSET, capacity); // claimed, no header
            Posix.close(writer, raw.path()); // and died
            producer.sendDescriptors("consumer", List.of(descriptor(4))); // wraps to the start
            awaitDescriptors(consumer, inbox, 1, "the ring stayed blocked behind the claim");
            assertEquals(List.of(descriptor(4)), inbox.descriptors);
            assertEquals(1, consumer.unblocks());
        }
    }

    /** In a process that already swept the directory at its start: the new mailbox takes the dead one's place. */
    @Test
    void aMailboxTakesThePlaceOfADeadOneAndRefusesALiveOne() throws Exception {
        try (ShmMailbox first = ShmMailbox.open(shm.deployment("mailbox-test", "first"))) {
            // What a SIGKILLed predecessor leaves: its mailbox file, with nobody holding its lock.
            Files.write(shm.path().resolve(ShmNames.mailbox(NS, "restarted")), new byte[MailboxDescriptor.FILE_BYTES]);
            try (ShmMailbox restarted = ShmMailbox.open(shm.deployment("mailbox-test", "restarted"))) {
                first.sendAcks("restarted", List.of(new UUID(1, 2)));
                Inbox inbox = new Inbox();
                drain(restarted, inbox, 1);
                assertEquals(List.of(new UUID(1, 2)), inbox.acks);
            }
            EntityInUseException e = assertThrows(EntityInUseException.class, () -> ShmMailbox.open(shm.deployment("mailbox-test", "first")));
            assertTrue(e.getMessage().contains(ShmNames.mailbox(NS, "first")), e.getMessage());
        }
    }

    /** A peer whose owner is gone (its lock dropped) is noticed within the check interval, ring full or not. */
    @Test
    void aSendToAPeerThatWentAwayFailsInsteadOfWritingIntoItsRing() throws Exception {
        try (ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"))) {
            ShmMailbox consumer = ShmMailbox.open(shm.deployment("mailbox-test", "consumer"));
            producer.sendDescriptors("consumer", List.of(descriptor(1))); // maps the consumer's ring
            consumer.close();
            Thread.sleep(PeerMailboxes.CHECK_INTERVAL_MS + 50);
            PeerUnavailableException e = assertThrows(PeerUnavailableException.class,
                () -> producer.sendDescriptors("consumer", List.of(descriptor(2))));
            assertEquals("consumer", e.entity());
            assertTrue(!producer.isAlive("consumer"), "and it is reported dead");
        }
    }

    /**
     * What is at a peer's mailbox name is told in words about a mailbox, apart: nothing (not running, or its
     * file removed while it lives), a link, a file not sized yet (starting), a mailbox nobody owns (died).
     */
    @Test
    void sendingToAnEntityWithoutMailboxSaysWhatIsThere() throws Exception {
        Namespace ns = new Namespace(shm.deployment("mailbox-test", "x").namespace());
        try (ShmMailbox producer = ShmMailbox.open(shm.deployment("mailbox-test", "producer"))) {
            assertUnavailable(producer, "nobody", "entity nobody has no mailbox", "removed while it runs");
            java.nio.file.Files.createSymbolicLink(shm.path().resolve(ShmNames.mailbox(ns, "linked")), shm.path());
            assertUnavailable(producer, "linked", "symbolic link at its mailbox name");
            java.nio.file.Files.write(shm.path().resolve(ShmNames.mailbox(ns, "starting")), new byte[100]);
            assertUnavailable(producer, "starting", "is starting");
            java.nio.ByteBuffer dead = java.nio.ByteBuffer.allocate((int) MailboxDescriptor.FILE_BYTES)
                .order(java.nio.ByteOrder.nativeOrder());
            dead.putLong((int) MailboxDescriptor.INCARNATION_OFFSET, 7L); // a mailbox whose owner died: no lock on it
            java.nio.file.Files.write(shm.path().resolve(ShmNames.mailbox(ns, "dead")), dead.array());
            assertUnavailable(producer, "dead", "died and has not come back", "nobody owns its mailbox");
            for (String name : List.of("linked", "starting", "dead")) {
                java.nio.file.Files.delete(shm.path().resolve(ShmNames.mailbox(ns, name)));
            }
        }
    }

    private static void assertUnavailable(ShmMailbox from, String peer, String... says) {
        PeerUnavailableException e = assertThrows(PeerUnavailableException.class,
            () -> from.sendAcks(peer, List.of(UUID.randomUUID())));
        assertEquals(peer, e.entity());
        for (String s : says) {
            assertTrue(e.getMessage().contains(s), e.getMessage());
        }
        assertTrue(!e.getMessage().contains("producer"), "a mailbox has no producer: " + e.getMessage());
    }

    /**
     * Closing while other threads poll and send (a shutdown hook under application threads) must end them
     * with "closed", never touch an unmapped ring: that would kill the JVM, so it runs in a child.
     */
    @Test
    void closeWhileOtherThreadsUseTheRingsNeverCrashes() throws Exception {
        ChildJvm child = ChildJvm.start(MailboxCloseRace.class, shm.path().toString(), "200");
        int exit = child.await(120);
        assertEquals(null, child.crashReport(), "the child JVM crashed");
        assertEquals(0, exit, child.output());
        assertEquals("200", child.result("rounds"));
        child.deleteLog();
    }
}
