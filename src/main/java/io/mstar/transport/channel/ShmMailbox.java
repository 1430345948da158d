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
import io.mstar.transport.exceptions.MstarTransportException;
import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.DirectoryEntries;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.ShmDirectory;
import io.mstar.transport.lifecycle.Sweeper;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.shm.MappedSegment;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
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
 * <p>One class on purpose: its receive side, its send loop and close share one guard (a thread touches
 * a ring only between {@code enter()} and {@code exit()}); the peers' mappings are
 * {@link PeerMailboxes}', the recovery from dead writers {@link DeadWriters}', the checked reading
 * {@link RingReader}'s and its refusals {@link Refusals}', the message layout
 * {@link MailboxMessage}'s and the file layout {@link MailboxDescriptor}'s.
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
    private static final long SEND_TIMEOUT_NS = 30_000_000_000L;
    /** Looks at an empty ring, a pause between two, before a waiting thread yields. */
    static final int SPINS_BEFORE_SLEEP = 20;
    /**
     * Yields before a waiting thread sleeps: on a quiet machine a yield hands the core to this process's other
     * thread (the producer, the ACK thread) for a moment and the message often comes meanwhile, cheaper than a
     * sleep and a wake. On a busy one a yield hands it to a neighbour for a whole time slice: a yield that took
     * {@value #BUSY_YIELD_NS} ns or more turns yields off, in this process, for {@value #YIELDS_OFF_NS} ns.
     */
    static final int YIELDS_BEFORE_SLEEP = 100;
    static final long BUSY_YIELD_NS = 500_000;
    static final long YIELDS_OFF_NS = 100_000_000L;
    private static volatile long yieldsOffUntil = System.nanoTime();
    /** The longest sleep of a waiting thread: it then looks again (a dead sender's claim, a closing mailbox). */
    static final long MAX_SLEEP_MS = 100;

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
    // One message buffer per sending thread, as large as any peer's largest message: sends allocate none.
    private final ThreadLocal<Outbox> outboxes = ThreadLocal.withInitial(Outbox::allocate);
    private final byte[] entityAscii; // the sender name every message starts with
    private final DeadWriters deadWriters;
    private final MailboxMessage.Inbox polled = new MailboxMessage.Inbox(); // copied out of the ring, then dispatched
    private int pollDepth; // of the polling thread (one at a time)
    // Agrona reads and writes the rings through raw addresses, which nothing guards once unmapped: a
    // thread touches a ring only between enter() and exit(), and close() unmaps only when none does
    // (a shutdown hook closes while application threads still poll and send).
    private final AtomicInteger inRing = new AtomicInteger();
    // The thread handing polled messages to a listener now, or null: close() lets it finish before the file's lock
    // (our liveness) goes, since producers free what we read once we look dead (a SIGTERM during a handler).
    private volatile Thread dispatching;
    static final long DISPATCH_WAIT_MS = 5_000;
    /**
     * Test-only seam: {@code -Dmstar.test.noDispatchWait=true} drops the file's lock at close without waiting for
     * a listener in progress, so a test can show that the wait is what keeps a stopping consumer's bytes intact.
     */
    static final boolean NO_DISPATCH_WAIT = Boolean.getBoolean("mstar.test.noDispatchWait");
    private final CloseOnce closer = new CloseOnce();

    private ShmMailbox(Deployment deployment, MappedSegment file, Sweeper sweeper) {
        this.deployment = deployment;
        this.dir = deployment.directory();
        this.namespace = new Namespace(deployment.namespace());
        this.entity = deployment.entity();
        this.entityAscii = entity.getBytes(StandardCharsets.US_ASCII);
        this.file = file;
        this.sweeper = sweeper;
        this.peers = new PeerMailboxes(dir, namespace, entity);
        this.inbox = PeerMailbox.ring(file);
        this.inboxReader = new RingReader(inbox);
        this.doorbell = new Doorbell(file.memory());
        this.refusals = new Refusals(entity);
        this.deadWriters = new DeadWriters(inbox, file, entity);
        long incarnation;
        do {
            incarnation = Owner.newUuid().getLeastSignificantBits(); // unguessable by peers
        } while (incarnation == 0);
        VarHandle.releaseFence(); // the ring's initial state before the incarnation that says it is ready
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
        checkAgronaAccess();
        Path dir = ShmDirectory.prepare(deployment.directory());
        Sweeper sweeper = Sweeper.join(dir, deployment.config().reclaimInterval());
        MappedSegment file = null;
        ShmMailbox mailbox = null;
        boolean ok = false;
        try {
            file = createMailboxFile(dir, ShmNames.mailbox(new Namespace(deployment.namespace()), deployment.entity()));
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

    // A mailbox already at the name is a dead predecessor's (removed, then ours is made) or a live owner's.
    private static MappedSegment createMailboxFile(Path dir, String name) {
        long deadline = System.nanoTime() + TAKE_OVER_TIMEOUT_MS * 1_000_000L;
        while (true) {
            try {
                return MappedSegment.create(dir, name, MailboxDescriptor.FILE_BYTES);
            } catch (NativeCallException e) {
                if (e.errno() != Posix.EEXIST) {
                    throw e;
                }
            }
            if (Reclaimer.reclaimIfDead(dir, name) >= 0) {
                LOG.info("took the place of a dead process of the same entity: removed its mailbox {}", name);
                continue;
            }
            int ownerUid = DirectoryEntries.ownerUid(dir.resolve(name));
            if (ownerUid >= 0 && ownerUid != Posix.geteuid()) {
                throw new EntityInUseException("another user's file takes this entity's mailbox name: path="
                    + dir.resolve(name) + ", ownerUid=" + ownerUid + ", ourUid=" + Posix.geteuid() + ": remove it (as"
                    + " its owner or root), or give the deployment a directory no other user can write (MSTAR_SHM_DIR,"
                    + " docs/security.md)");
            }
            if (System.nanoTime() > deadline) {
                throw new EntityInUseException("another live process runs as this entity in this deployment (it holds"
                    + " the mailbox): path=" + dir.resolve(name) + ": give each process its own entity, or stop the"
                    + " other one first");
            }
            PeerMailboxes.sleepMs(10); // a sweep or a peer's probe holds it for a moment, or its owner lives
        }
    }

    /** Fails, naming the flag, when Agrona's buffers could not reach {@code jdk.internal.misc}. */
    public static void checkAgronaAccess() {
        Module agrona;
        try {
            agrona = Class.forName("org.agrona.concurrent.UnsafeBuffer", false, ShmMailbox.class.getClassLoader()).getModule();
        } catch (ClassNotFoundException e) {
            throw new ConfigurationException("the mailbox needs Agrona (org.agrona:agrona) on the class path");
        }
        if (!Object.class.getModule().isExported("jdk.internal.misc", agrona)) {
            String target = agrona.isNamed() ? agrona.getName() : "ALL-UNNAMED";
            throw new ConfigurationException("the shared-memory mailbox needs a JVM flag: add --add-exports"
                + " java.base/jdk.internal.misc=" + target + " to the java command (Agrona 2.6 on JDK "
                + Runtime.version().feature() + "); transports without the mailbox do not need it");
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
        int at = peer.indexOf('@');
        String name = at < 0 ? peer : peer.substring(0, at);
        long incarnation = at < 0 ? 0 : Long.parseUnsignedLong(peer.substring(at + 1), 16);
        if (!tryEnter()) {
            return true; // closing: decide nothing for the transport
        }
        try {
            PeerMailbox known = peers.cached(name);
            if (known != null && (incarnation == 0 || known.incarnation == incarnation)) {
                return known.ownerAlive();
            }
        } finally {
            exit();
        }
        long live = peers.liveIncarnation(name);
        return live != 0 && (incarnation == 0 || live == incarnation);
    }

    /** Waits until {@code peer} runs (its mailbox exists, is held and ready), or the timeout passes. */
    @Override
    public boolean awaitPeer(String peer, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (peers.liveIncarnation(ShmNames.checkEntity(peer)) == 0) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
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
                (out, d) -> out.message.position(out.message.position()
                    + DescriptorCodec.encode(d, out.segment, out.message.position())));
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
            (out, uuid) -> out.message.putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits()));
    }

    @Override
    public void sendDescriptorRecord(String toEntity, MemorySegment record, long offset, int length) {
        if (DescriptorCodec.recordLength(record, offset, length) != length) {
            throw new DescriptorFormatException("length", "the record declares another length than " + length);
        }
        String delivered;
        enter();
        try {
            PeerMailbox peer = peers.get(toEntity);
            Outbox out = outboxes.get();
            MailboxMessage.start(out.message, entityAscii);
            MemorySegment.copy(record, offset, out.segment, out.message.position(), length);
            out.message.position(out.message.position() + length);
            flush(peer, MailboxMessage.DESCRIPTORS, out, 1);
            delivered = peer.key();
        } catch (PeerUnavailableException e) {
            ConsumerLiveness attached = producer;
            if (attached != null) {
                attached.neverReached(toEntity, List.of(new UUID(DescriptorCodec.uuidMsb(record, offset),
                    DescriptorCodec.uuidLsb(record, offset))));
            }
            throw e;
        } finally {
            exit();
        }
        ConsumerLiveness attached = producer;
        if (attached != null) {
            attached.sentTo(delivered, DescriptorCodec.uuidMsb(record, offset), DescriptorCodec.uuidLsb(record, offset));
        }
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
        enter();
        try {
            PeerMailbox peer = peers.get(toEntity);
            Outbox out = outboxes.get();
            MailboxMessage.start(out.message, entityAscii);
            out.message.putLong(uuidMsb).putLong(uuidLsb);
            flush(peer, type, out, 1);
        } finally {
            exit();
        }
    }

    @Override
    public void sendAcks(String toEntity, long[] uuidHalves, int count) {
        if (count < 0 || 2L * count > uuidHalves.length) {
            throw new IllegalArgumentException(count + " ACKs need " + 2L * count + " uuid halves, given "
                + uuidHalves.length);
        }
        enter();
        try {
            PeerMailbox peer = peers.get(toEntity);
            int max = peer.ring.maxMsgLength();
            Outbox out = outboxes.get();
            int inMessage = 0;
            for (int k = 0; k < count; k++) {
                if (inMessage == 0) {
                    MailboxMessage.start(out.message, entityAscii);
                }
                out.message.putLong(uuidHalves[2 * k]).putLong(uuidHalves[2 * k + 1]);
                inMessage++;
                if (out.message.position() + MailboxMessage.UUID_LENGTH > max) {
                    flush(peer, MailboxMessage.ACKS, out, inMessage);
                    inMessage = 0;
                }
            }
            if (inMessage > 0) {
                flush(peer, MailboxMessage.ACKS, out, inMessage);
            }
        } finally {
            exit();
        }
    }

    // Packs items into as few ring messages as the ring's message limit allows, in order; returns the key of
    // the incarnation that got them.
    private <T> String sendBatched(String toEntity, int type, Collection<T> items, ToIntFunction<T> length,
                                   BiConsumer<Outbox, T> write) {
        enter();
        try {
            PeerMailbox peer = peers.get(toEntity);
            int max = peer.ring.maxMsgLength();
            Outbox out = outboxes.get();
            ByteBuffer message = out.message;
            int count = 0;
            for (T item : items) {
                if (count > 0 && message.position() + length.applyAsInt(item) > max) {
                    flush(peer, type, out, count);
                    count = 0;
                }
                if (count == 0) {
                    MailboxMessage.start(message, entityAscii);
                }
                write.accept(out, item);
                count++;
            }
            if (count > 0) {
                flush(peer, type, out, count);
            }
            return peer.key();
        } finally {
            exit();
        }
    }

    // Called between enter() and exit().
    private void flush(PeerMailbox peer, int type, Outbox out, int count) {
        MailboxMessage.finish(out.message, entityAscii.length, count);
        if (peer.ring.write(type, out.buffer, 0, out.message.position())) {
            peer.doorbell.ring();
            return; // the common case reads no clock: a clock read costs as much as the write on some VMs
        }
        long start = System.nanoTime();
        long nextCheck = start + PeerMailboxes.CHECK_INTERVAL_MS * 1_000_000L;
        while (!peer.ring.write(type, out.buffer, 0, out.message.position())) {
            if (closer.isClosed()) {
                throw closedException();
            }
            long now = System.nanoTime();
            if (now - nextCheck > 0) { // a full ring whose reader died never drains
                nextCheck = now + PeerMailboxes.CHECK_INTERVAL_MS * 1_000_000L;
                if (!peer.ownerAlive()) {
                    peers.retire(peer);
                    throw peers.unavailable(peer.entity, "died with its mailbox full");
                }
            }
            if (now - start > SEND_TIMEOUT_NS) {
                throw new MstarTransportException("mailbox full: entity=" + peer.entity + " took no message for "
                    + SEND_TIMEOUT_NS / 1_000_000_000L + " s; is it polling its mailbox?");
            }
            Thread.onSpinWait();
        }
        peer.doorbell.ring();
    }

    /**
     * One sending thread's message buffer, as large as any peer's largest message, with the two views that
     * encoding and the ring need: made once per thread, so sends allocate none of them.
     */
    private record Outbox(ByteBuffer message, MemorySegment segment, UnsafeBuffer buffer) {
        static Outbox allocate() {
            ByteBuffer message = ByteBuffer.allocate(MailboxDescriptor.RING_BYTES / 8).order(ByteOrder.LITTLE_ENDIAN);
            return new Outbox(message, MemorySegment.ofArray(message.array()), new UnsafeBuffer(message.array()));
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
        enter();
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
            exit();
        }
        Thread outer = dispatching;
        dispatching = Thread.currentThread();
        try {
            for (int i = 0; i < polled.count(); i++) {
                try {
                    if (objects != null) {
                        polled.dispatch(i, deployment, objects);
                    } else {
                        polled.dispatchRecords(i, records);
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
            awaitMessage(left, () -> false);
        }
    }

    /**
     * Waits, without using a CPU, until a message may wait in this mailbox, {@code ready} holds, or
     * {@code timeoutNs} passes (at most {@value #MAX_SLEEP_MS} ms at a time); after a short spin, in case one
     * comes at once. Any thread may wait; returns early on a wake, and the caller polls again.
     */
    public void awaitMessage(long timeoutNs, BooleanSupplier ready) {
        if (!tryEnter()) {
            return; // closing: the caller's next poll says so
        }
        try {
            if (spinAndYield(ready)) {
                return;
            }
            doorbell.prepareToSleep();
            if (!inboxReader.hasMessage() && !ready.getAsBoolean() && !closer.isClosed()) {
                doorbell.sleep(Math.min(timeoutNs, MAX_SLEEP_MS * 1_000_000L));
            }
        } finally {
            exit();
        }
    }

    // Called between enter() and exit(): whether a message or `ready` came while it spun, then yielded.
    private boolean spinAndYield(BooleanSupplier ready) {
        for (int i = 0; i < SPINS_BEFORE_SLEEP; i++) {
            if (inboxReader.hasMessage() || ready.getAsBoolean()) {
                return true;
            }
            Thread.onSpinWait();
        }
        for (int i = 0; i < YIELDS_BEFORE_SLEEP && System.nanoTime() - yieldsOffUntil > 0 && !closer.isClosed(); i++) {
            if (inboxReader.hasMessage() || ready.getAsBoolean()) {
                return true;
            }
            long before = System.nanoTime();
            Thread.yield();
            long after = System.nanoTime();
            if (after - before > BUSY_YIELD_NS) { // another thread took the core for a time slice: the machine is busy
                yieldsOffUntil = after + YIELDS_OFF_NS;
                break;
            }
        }
        return false;
    }

    /** Wakes this mailbox's waiting threads: something they wait for came another way (another node, an outcome). */
    public void wake() {
        if (tryEnter()) {
            try {
                doorbell.ring();
            } finally {
                exit();
            }
        }
    }

    private void enter() {
        if (!tryEnter()) {
            throw closedException();
        }
    }

    private boolean tryEnter() {
        inRing.incrementAndGet();
        if (closer.isClosed()) { // read after the increment: close() sets it before it waits for inRing to drain
            exit();
            return false;
        }
        return true;
    }

    private void exit() {
        // The last thread out unmaps retired peers: a thread that could still use one is inside, and no
        // thread that enters later can find one.
        if (inRing.decrementAndGet() == 0 && peers.hasRetired()) {
            peers.closeRetired();
        }
    }

    // Waits (bounded) for a listener in progress on another thread: until it returns, this process still reads
    // the tensors it was handed, and its producers must not take it for dead.
    private void awaitDispatch() {
        if (NO_DISPATCH_WAIT) {
            return;
        }
        long deadline = System.nanoTime() + DISPATCH_WAIT_MS * 1_000_000L;
        Thread reader;
        while ((reader = dispatching) != null && reader != Thread.currentThread() && System.nanoTime() < deadline) {
            PeerMailboxes.sleepMs(1);
        }
        if (reader != null && reader != Thread.currentThread()) {
            LOG.warn("mailbox closed while a listener still ran for {} ms: entity={}, thread={}", DISPATCH_WAIT_MS,
                entity, reader.getName());
        }
    }

    private IllegalStateException closedException() {
        return new IllegalStateException("mailbox is closed: entity=" + entity);
    }

    /** The counts below, together. */
    public TensorEndpoint.MailboxStats stats() {
        long[] unread = {0, 0};
        if (tryEnter()) {
            try {
                unread = inboxReader.unread();
            } finally {
                exit();
            }
        }
        return new TensorEndpoint.MailboxStats(garbageRecords(), badMessages(), unblocks(), unread[0], unread[1]);
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
        closer.close(this::release);
    }

    private void release() {
        awaitDispatch();
        peers.stopMapping();
        ShutdownCleanup.unregister(this);
        while (inRing.get() > 0) { // each holder leaves within one ring operation, one write attempt or one wake
            doorbell.wakeAll();
            Thread.onSpinWait();
        }
        peers.closeAll();
        try {
            deadWriters.close();
            file.close();
        } finally {
            sweeper.leave();
        }
    }
}
