package io.mstar.transport.channel;

import io.mstar.transport.Deployment;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.DescriptorFormatException;
import io.mstar.transport.exceptions.EntityInUseException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.ShmDirectory;
import io.mstar.transport.lifecycle.Sweeper;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.shm.MappedSegment;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.UUID;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.ToIntFunction;

/**
 * A mailbox per receiving entity: an Agrona {@link ManyToOneRingBuffer} in a shared-memory file named
 * {@code mstar_<ns>_mailbox_<entity>}, which the receiver creates and every sender maps read-write; the
 * file's layout and its publication rules are in {@link MailboxDescriptor}.
 *
 * <h2>Liveness and restarts</h2>
 * The receiver holds its file's lock for its lifetime ({@link OwnedFile}). A process starting under the
 * entity of a dead one removes the dead one's mailbox and creates its own (a new incarnation); while the
 * old one's owner lives, it fails with {@link EntityInUseException}. Senders keep a descriptor on each
 * peer's file and check its lock at most every {@value PeerMailboxes#CHECK_INTERVAL_MS} ms ({@link PeerMailboxes}): a dead peer's mapping
 * is dropped, a new incarnation at the name is mapped and used, and when none lives the send fails with
 * {@link PeerUnavailableException} instead of writing into a ring nobody reads. The check looks at the
 * inode the sender mapped, so removing a live mailbox's name by hand does not make its owner look dead.
 *
 * Messages are laid out as {@link MailboxMessage} says. The ring buffer publishes a record by writing its
 * positive length last (Agrona's rule). Senders write with Agrona's calls; the receiver reads with
 * {@link RingReader}, which believes no length a writer put there, and counts what it refuses in
 * {@link Refusals}. A sender that dies between claiming and committing a record would block the ring:
 * {@link DeadWriters} skips such a record once its writer is known dead.
 *
 * <p>Needs the JVM flag {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED} on JDK 25 (Agrona
 * 2.6's buffers use that package); {@link #open} checks for it first and names the flag.
 *
 * <p>One class on purpose: it is the channel a process opens, and what is left here is the guard around each
 * role's class. Its receive side, its sends and close share one guard (a thread touches a ring only between
 * {@code enter()} and {@code exit()}: {@link RingGuard}); each role is a class of its own: making the file {@link MailboxFile}, the
 * peers' mappings {@link PeerMailboxes}, writing into their rings {@link RingWriter}, the checked reading
 * {@link RingReader} and its refusals {@link Refusals}, the recovery from dead writers {@link DeadWriters}, a
 * reader's wait {@link Waiting} and sleep {@link Doorbell}, the message layout {@link MailboxMessage} and the
 * file layout {@link MailboxDescriptor}.
 */
public final class ShmMailbox implements TensorChannel, TensorChannel.Records {
    private static final Logger LOG = LoggerFactory.getLogger(ShmMailbox.class);

    /** How long a new process waits for a mailbox at its name to be released before deciding its owner lives. */
    static final long TAKE_OVER_TIMEOUT_MS = 2000;
    static final long UNBLOCK_AFTER_MS = 1000;
    /**
     * How long a claim may stay uncommitted while its writer lives before it is skipped: far past a GC pause
     * or a busy machine's scheduling delay, short enough that a stopped or buggy writer cannot hold the ring.
     */
    static final long STUCK_CLAIM_MS = 3000;
    /**
     * The longest sleep of a waiting thread: it then looks again (a dead sender's claim); a closing mailbox wakes
     * its sleepers itself. Idle, a waiting thread wakes once a second.
     */
    static final long MAX_SLEEP_MS = 1000;

    private final Deployment deployment; // the namespace descriptors are decoded against
    private final Path dir;
    private final Namespace namespace;
    private final String entity;
    private final MappedSegment file; // its lock is our liveness
    private final Sweeper sweeper;
    private volatile ConsumerLiveness producer; // told which consumer each descriptor batch went to
    private final ManyToOneRingBuffer inbox;
    private final RingReader inboxReader; // reads the ring believing none of its lengths
    private final Doorbell doorbell; // our readers sleep on it; senders ring it
    private final PeerMailboxes peers;
    private final Refusals refusals;
    private final RingWriter writer; // into peers' rings
    private final byte[] entityAscii; // the sender name every message starts with
    private final DeadWriters deadWriters;
    private final MailboxMessage.Inbox polled = new MailboxMessage.Inbox(); // copied out of the ring, then dispatched
    private int pollDepth; // of the polling thread (one at a time)
    // The thread handing polled messages to a listener now, or null: close() lets it finish before the file's lock
    // (our liveness) goes, since producers free what we read once we look dead (a SIGTERM during a handler).
    private volatile Thread dispatching;
    private volatile Thread handling; // an endpoint's thread in a handler of a tensor it took from here, or null
    static final long DISPATCH_WAIT_MS = 5_000;
    /**
     * Test-only seam: {@code -Dmstar.test.noDispatchWait=true} drops the file's lock at close without waiting for
     * a listener in progress, so a test can show that the wait is what keeps a stopping consumer's bytes intact.
     */
    static final boolean NO_DISPATCH_WAIT = Boolean.getBoolean("mstar.test.noDispatchWait");
    private final RingGuard guard; // who is inside the rings: close unmaps once none is
    private final PositionReading positions = new PositionReading(); // what we sent by position, and the rule
    private final MailboxMessage.UuidSink keptSink = positions::kept;
    private final OwnInbox ownInbox = new OwnInbox(); // used by the polling thread

    private ShmMailbox(Deployment deployment, MappedSegment file, Sweeper sweeper) {
        this.deployment = deployment;
        this.dir = deployment.directory();
        this.namespace = new Namespace(deployment.namespace());
        this.entity = deployment.entity();
        this.entityAscii = entity.getBytes(StandardCharsets.US_ASCII);
        this.file = file;
        this.sweeper = sweeper;
        this.peers = new PeerMailboxes(dir, namespace, entity);
        this.guard = new RingGuard(peers, entity);
        this.writer = new RingWriter(peers, entityAscii, guard::isClosed, guard::closedException);
        this.inbox = PeerMailbox.ring(file);
        this.inboxReader = new RingReader(inbox);
        this.doorbell = new Doorbell(file.memory());
        this.refusals = new Refusals(entity);
        this.deadWriters = new DeadWriters(inbox, file, entity);
        long incarnation;
        do {
            incarnation = Owner.newUuid().getLeastSignificantBits(); // unguessable by peers
        } while (incarnation == 0);
        file.memory().set(ValueLayout.JAVA_INT, MailboxDescriptor.VERSION_OFFSET, MailboxDescriptor.VERSION);
        VarHandle.releaseFence(); // the ring's initial state and version before the incarnation that says it is ready
        file.memory().set(ValueLayout.JAVA_LONG, MailboxDescriptor.INCARNATION_OFFSET, incarnation);
    }

    /**
     * Creates the deployment entity's mailbox, taking the place of a dead process of the same entity; this
     * process sweeps dead owners' files every {@value TransportConfig#RECLAIM_INTERVAL_S} ({@link Sweeper}).
     *
     * @throws ConfigurationException when the JVM lacks the export Agrona needs
     * @throws EntityInUseException   when a live process already runs as this entity
     */
    public static ShmMailbox open(Deployment deployment) {
        MailboxFile.checkAgronaAccess();
        Path dir = ShmDirectory.prepare(deployment.directory());
        Sweeper sweeper = Sweeper.join(dir, deployment.config().reclaimInterval());
        MappedSegment file = null;
        ShmMailbox mailbox = null;
        boolean ok = false;
        try {
            file = MailboxFile.create(dir, ShmNames.mailbox(new Namespace(deployment.namespace()), deployment.entity()));
            mailbox = new ShmMailbox(deployment, file, sweeper);
            ShutdownCleanup.register(mailbox); // refused once the JVM stops: then the file goes at once
            ok = true;
            return mailbox;
        } finally {
            if (!ok) {
                if (mailbox != null) {
                    mailbox.close(); // its file, its descriptors and its place in the sweep
                } else {
                    if (file != null) {
                        file.close();
                    }
                    sweeper.leave();
                }
            }
        }
    }

    /**
     * Attaches the transport this entity produces with: each descriptor batch sent through the mailbox is
     * reported to it ({@link ConsumerLiveness#sentTo}), and it checks consumers' liveness with this mailbox,
     * so it frees what it sent to a consumer that died.
     */
    public void attach(ConsumerLiveness transport) {
        this.producer = transport;
        transport.watch(this::isAlive);
    }

    /**
     * Whether a peer is alive: {@code entity} (any incarnation) or {@code entity@incarnation} (as reported
     * to an attached transport). Alive means its owner holds its mailbox's lock (the kernel drops it when
     * the process dies, even by SIGKILL) and, for a given incarnation, that it is still that one.
     */
    public boolean isAlive(String peer) {
        return peers.isAlive(peer, guard);
    }

    /** Waits until {@code peer} runs (its mailbox exists, is held and ready), or the timeout passes. */
    @Override
    public boolean awaitPeer(String peer, Duration timeout) throws InterruptedException {
        return peers.awaitLive(ShmNames.checkEntity(peer), timeout);
    }

    /**
     * @throws PeerUnavailableException when {@code toEntity} never started, or died and has not come back;
     *                                  the descriptors stay in flight
     */
    @Override
    public void sendDescriptors(String toEntity, List<TensorDescriptor> descriptors) {
        String delivered;
        try {
            delivered = sendBatched(toEntity, MailboxMessage.DESCRIPTORS, descriptors, DescriptorCodec::encodedLength,
                (out, d) -> out.message().position(out.message().position()
                    + DescriptorCodec.encode(d, out.segment(), out.message().position())));
        } catch (PeerUnavailableException e) {
            neverReached(toEntity, descriptors);
            throw e;
        }
        ConsumerLiveness attached = producer;
        if (attached != null) {
            attached.sentTo(delivered, descriptors.stream().map(TensorDescriptor::uuid).toList());
        }
    }

    // Tells the attached transport that no incarnation of the entity got these (its fan-out shares go).
    void neverReached(String toEntity, List<TensorDescriptor> descriptors) {
        ConsumerLiveness attached = producer;
        if (attached != null) {
            attached.neverReached(toEntity, descriptors.stream().map(TensorDescriptor::uuid).toList());
        }
    }

    /** @throws PeerUnavailableException when {@code toEntity} never started, or died and has not come back */
    @Override
    public void sendAcks(String toEntity, Collection<UUID> uuids) {
        sendBatched(toEntity, MailboxMessage.ACKS, uuids, uuid -> MailboxMessage.UUID_LENGTH,
            (out, uuid) -> out.message().putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits()));
    }

    @Override
    public void sendDescriptorRecord(String toEntity, MemorySegment record, long offset, int length) {
        sendRecord(toEntity, record, offset, length, false);
    }

    /**
     * As {@link #sendDescriptorRecord}, delivered by position (docs/format.md, 12a): the consumer sends no ACK for
     * it once handled, and its handled position says so instead, which {@link #readPositions} reads. For a sender
     * that reads this mailbox with {@code readPositions}: an endpoint.
     */
    @Override
    public void postRecord(String toEntity, MemorySegment record, long offset, int length) {
        sendRecord(toEntity, record, offset, length, true);
    }

    private void sendRecord(String toEntity, MemorySegment record, long offset, int length, boolean byPosition) {
        if (DescriptorCodec.recordLength(record, offset, length) != length) {
            throw new DescriptorFormatException("length", "the record declares another length than " + length);
        }
        String delivered;
        guard.enter();
        try {
            if (byPosition) {
                PeerMailbox peer = writer.writeByPosition(toEntity, record, offset, length, positions);
                delivered = peer.key();
            } else {
                delivered = writer.writeRecord(toEntity, record, offset, length);
            }
        } catch (PeerUnavailableException e) {
            ConsumerLiveness attached = producer;
            if (attached != null) {
                attached.neverReached(toEntity, List.of(new UUID(DescriptorCodec.uuidMsb(record, offset),
                    DescriptorCodec.uuidLsb(record, offset))));
            }
            throw e;
        } finally {
            guard.exit();
        }
        ConsumerLiveness attached = producer;
        if (attached != null) {
            attached.sentTo(delivered, DescriptorCodec.uuidMsb(record, offset), DescriptorCodec.uuidLsb(record, offset));
        }
    }

    /** Whether a consumer's handled position passed a tensor this mailbox sent it by position: a reader has work. */
    public boolean positionsDue() {
        return positions.due();
    }

    /**
     * Learns what the consumers this mailbox sent to by position handled ({@link PositionReading}), and hands each
     * tensor a position passed, and its consumer did not keep, to {@code listener.ack}. Called by the thread that
     * polls; returns the tensors handed on.
     */
    public int readPositions(RecordListener listener) {
        ownInbox.listener = listener;
        try {
            return positions.read(ownInbox, ownInbox);
        } finally {
            ownInbox.listener = null;
        }
    }

    // This mailbox as the position rule reads it, and where the tensors passed go: an ACK of their consumer's.
    private final class OwnInbox implements PositionReading.Inbox, PositionReading.Passed {
        RecordListener listener;
        String consumer;

        @Override
        public long tail() {
            if (!guard.tryEnter()) {
                return Long.MAX_VALUE; // closing: never read to
            }
            try {
                return inboxReader.tail();
            } finally {
                guard.exit();
            }
        }

        @Override
        public long head() {
            return inboxReader.head();
        }

        @Override
        public int read() {
            return guard.isClosed() ? 0 : poll(null, listener, 64);
        }

        @Override
        public void from(String entity) {
            consumer = entity;
        }

        @Override
        public void accept(long msb, long lsb) {
            listener.ack(consumer, msb, lsb);
        }
    }

    /**
     * This consumer handled the ring's descriptors up to {@code position} (the end of a message whose every record
     * was handled, kept or refused): published for the producers that sent by position.
     */
    public void handled(long position) {
        try {
            MailboxDescriptor.publishHandled(file.memory(), position);
        } catch (IllegalStateException closed) {
            // a handler closed the endpoint: nobody reads the position of a mailbox that is gone
        }
    }

    /** Rings a producer's doorbell: its thread asleep on its mailbox wakes to read our handled position. */
    public void wakeProducer(String producer) {
        if (guard.tryEnter()) {
            try {
                peers.get(producer).doorbell.ring(); // mapped the first time: a consumer that sends no ACKs may not have it
            } catch (PeerUnavailableException gone) {
                // nobody to wake
            } finally {
                guard.exit();
            }
        }
    }

    /** Tells a producer that this consumer keeps a tensor it sent by position: an ACK or refusal follows. */
    public void sendKept(String toEntity, long uuidMsb, long uuidLsb) {
        sendOne(toEntity, MailboxMessage.KEPT, uuidMsb, uuidLsb);
    }

    @Override
    public void sendAck(String toEntity, long uuidMsb, long uuidLsb) {
        sendOne(toEntity, MailboxMessage.ACKS, uuidMsb, uuidLsb);
    }

    @Override
    public void sendRefusal(String toEntity, long uuidMsb, long uuidLsb) {
        sendOne(toEntity, MailboxMessage.REFUSALS, uuidMsb, uuidLsb);
    }

    private void sendOne(String toEntity, int type, long uuidMsb, long uuidLsb) {
        guard.enter();
        try {
            writer.writeOne(toEntity, type, uuidMsb, uuidLsb);
        } finally {
            guard.exit();
        }
    }

    @Override
    public void sendAcks(String toEntity, long[] uuidHalves, int count) {
        if (count < 0 || 2L * count > uuidHalves.length) {
            throw new IllegalArgumentException(count + " ACKs need " + 2L * count + " uuid halves, given "
                + uuidHalves.length);
        }
        guard.enter();
        try {
            writer.writeAcks(toEntity, uuidHalves, count);
        } finally {
            guard.exit();
        }
    }

    // Packs items into as few ring messages as the ring's message limit allows, in order; returns the key of
    // the incarnation that got them.
    private <T> String sendBatched(String toEntity, int type, Collection<T> items, ToIntFunction<T> length,
                                   BiConsumer<RingWriter.Outbox, T> write) {
        guard.enter();
        try {
            return writer.writeBatched(toEntity, type, items, length, write);
        } finally {
            guard.exit();
        }
    }

    @Override
    public Records records() {
        return this;
    }

    /** Polls from one thread at a time (the ring has one reader); the listener runs outside the ring. */
    @Override
    public int poll(Listener listener, int limit) {
        return poll(listener, null, limit);
    }

    @Override
    public int pollRecords(RecordListener listener, int limit) {
        return poll(null, listener, limit);
    }

    // One of the two listeners is null.
    private int poll(Listener objects, RecordListener records, int limit) {
        // A listener may poll again (an endpoint's handler awaiting a delivery): each depth dispatches its own copy.
        MailboxMessage.Inbox polled = pollDepth++ == 0 ? this.polled : new MailboxMessage.Inbox();
        try {
            return poll(polled, objects, records, limit);
        } finally {
            pollDepth--;
        }
    }

    private int poll(MailboxMessage.Inbox polled, Listener objects, RecordListener records, int limit) {
        int read;
        guard.enter();
        try {
            long skippedBefore = inboxReader.skippedRecords();
            read = inboxReader.read(polled, limit);
            if (inboxReader.skippedRecords() != skippedBefore) {
                refusals.garbage(inboxReader.skippedRecords() - skippedBefore, inboxReader.skippedBytes());
            }
            if (read == 0) {
                deadWriters.nothingRead();
            } else {
                deadWriters.progressed();
            }
        } finally {
            guard.exit();
        }
        Thread outer = dispatching;
        dispatching = Thread.currentThread();
        try {
            for (int i = 0; i < polled.count(); i++) {
                try {
                    if (objects != null) {
                        polled.dispatch(i, deployment, objects);
                    } else {
                        polled.dispatchRecords(i, records, keptSink);
                    }
                } catch (RuntimeException e) {
                    refusals.message(polled.type(i), polled.length(i), e);
                }
            }
        } finally {
            dispatching = outer;
            polled.clear();
        }
        return read;
    }

    @Override
    public int receive(Listener listener, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            int read = poll(listener, 64);
            long left = deadline - System.nanoTime();
            if (read > 0 || left <= 0) {
                return read;
            }
            awaitMessage(left, () -> false, true);
        }
    }

    /**
     * Waits, without using a CPU, until a message may wait in this mailbox, {@code ready} holds, or
     * {@code timeoutNs} passes (at most {@value #MAX_SLEEP_MS} ms at a time); after a short spin and, with
     * {@code yields}, yields ({@link Waiting}), in case one comes at once; a background thread, which should not
     * compete with the application's for the cores, passes no {@code yields}. Any thread may wait; returns early on
     * a wake, and the caller polls again.
     */
    public void awaitMessage(long timeoutNs, BooleanSupplier ready, boolean yields) {
        if (!guard.tryEnter()) {
            return; // closing: the caller's next poll says so
        }
        try {
            if (Waiting.spinThenYield(inboxReader, ready, guard, yields)) {
                return;
            }
            doorbell.prepareToSleep();
            if (!inboxReader.hasMessage() && !ready.getAsBoolean() && !guard.isClosed()) {
                doorbell.sleep(Math.min(timeoutNs, MAX_SLEEP_MS * 1_000_000L));
            }
        } finally {
            guard.exit();
        }
    }

    /** Wakes this mailbox's waiting threads: something they wait for came another way (another node, an outcome). */
    public void wake() {
        if (guard.tryEnter()) {
            try {
                doorbell.ring();
            } finally {
                guard.exit();
            }
        }
    }

    /**
     * The calling thread runs ({@code true}) or has run a handler on a tensor taken from this mailbox: an endpoint
     * hands tensors over after it let go of the mailbox, and close waits for that handler as for a listener.
     */
    public void handlerRuns(boolean runs) {
        handling = runs ? Thread.currentThread() : null;
        guard.allowLateWrites(handling); // a close meanwhile waits for the handler, whose ACKs still go
    }

    // Waits (bounded) for a listener or handler in progress on another thread: until it returns, this process still
    // reads the tensors it was handed, and its producers must not take it for dead.
    private void awaitDispatch() {
        if (NO_DISPATCH_WAIT) {
            return;
        }
        long deadline = System.nanoTime() + DISPATCH_WAIT_MS * 1_000_000L;
        Thread reader;
        while ((reader = readerNow()) != null && System.nanoTime() < deadline) {
            PeerMailboxes.sleepMs(1);
        }
        if (reader != null) {
            LOG.warn("mailbox closed while a listener still ran for {} ms: entity={}, thread={}", DISPATCH_WAIT_MS,
                entity, reader.getName());
        }
    }

    // A thread other than this one in a listener or a handler of this mailbox's messages, or null.
    private Thread readerNow() {
        Thread me = Thread.currentThread();
        Thread t = dispatching;
        if (t != null && t != me) {
            return t;
        }
        t = handling;
        return t != null && t != me ? t : null;
    }

    /** The counts below, together. */
    public TensorEndpoint.MailboxStats stats() {
        long[] unread = {0, 0};
        if (guard.tryEnter()) {
            try {
                unread = inboxReader.unread();
            } finally {
                guard.exit();
            }
        }
        return new TensorEndpoint.MailboxStats(garbageRecords(), badMessages(), unblocks(), unread[0], unread[1]);
    }

    /**
     * A descriptor record taken from here refused before its handler (a field out of range, a file that is not ours
     * to map): counted with the messages that did not decode, and said at most once per ten seconds.
     */
    public void refusedRecord(int length, RuntimeException why) {
        refusals.message(MailboxMessage.DESCRIPTORS, length, why);
    }

    /** Messages that could not be decoded or whose listener threw. */
    public long badMessages() {
        return refusals.messages();
    }

    /** Records skipped in the ring because their length or type was impossible. */
    public long garbageRecords() {
        return refusals.garbageRecords();
    }

    /** Times a record abandoned by a dead writer was skipped. */
    public long unblocks() {
        return deadWriters.unblocks();
    }

    public String entity() {
        return entity;
    }

    /**
     * Unmaps the peers' mailboxes and removes our own. Idempotent; a second caller returns only once the
     * first one has finished.
     */
    @Override
    public void close() {
        guard.close(this::release);
    }

    private void release() {
        awaitDispatch();
        guard.endLateWrites();
        peers.stopMapping();
        ShutdownCleanup.unregister(this);
        guard.awaitNoneInside(doorbell::wakeAll);
        peers.closeAll();
        try {
            deadWriters.close();
            file.close();
        } finally {
            sweeper.leave();
        }
    }
}
