package io.mstar.transport.channel;

import io.mstar.transport.ConfigurationException;
import io.mstar.transport.DescriptorFormatException;
import io.mstar.transport.MstarTransportException;
import io.mstar.transport.SegmentAccessException;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.lifecycle.Namespace;
import io.mstar.transport.lifecycle.NamespaceLock;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.lifecycle.ShmNames;
import io.mstar.transport.shm.MappedSegment;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.ToIntFunction;

/**
 * A mailbox per receiving entity: an Agrona {@link ManyToOneRingBuffer} in a shared-memory file named
 * {@code mstar_<ns>_mailbox_<entity>}, which the receiver creates and every sender maps read-write.
 *
 * <pre>
 *   message (little-endian), type 1 = descriptors, 2 = ACKs:
 *  +----------+---------------------+-----------+-------------------------------------------+
 *  | u8 n     | sender entity (n B) | u16 count | count descriptor records | count x 16 B uuid |
 *  +----------+---------------------+-----------+-------------------------------------------+
 * </pre>
 * The ring buffer publishes a record by writing its positive length last (Agrona's rule). A sender
 * that dies between claiming and committing a record would block the ring: when the receiver sees no
 * progress past a pending record for {@value #UNBLOCK_AFTER_MS} ms, it calls
 * {@link ManyToOneRingBuffer#unblock()}, which turns that record into padding.
 *
 * <p>Needs the JVM flag {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED} on JDK 25 (Agrona
 * 2.6's buffers use that package); {@link #open} checks for it first and names the flag.
 */
public final class ShmMailbox implements TensorChannel {
    private static final Logger LOG = LoggerFactory.getLogger(ShmMailbox.class);

    /** Bytes of the ring itself (a power of two); the file adds Agrona's trailer. */
    public static final int RING_BYTES = 1 << 20;
    static final int FILE_BYTES = RING_BYTES + RingBufferDescriptor.TRAILER_LENGTH;
    static final int DESCRIPTORS = 1;
    static final int ACKS = 2;
    static final long UNBLOCK_AFTER_MS = 1000;
    private static final long SEND_TIMEOUT_NS = 30_000_000_000L;

    private final Path dir;
    private final Namespace namespace;
    private final String entity;
    private final MappedSegment file;
    private final NamespaceLock namespaceLock;
    private final int livenessFd;         // holds an exclusive flock on our mailbox file while we live
    private volatile TensorTransport producer; // told which consumer each descriptor batch went to
    private final ManyToOneRingBuffer inbox;
    private final Map<String, Peer> peers = new ConcurrentHashMap<>();
    private final AtomicLong badMessages = new AtomicLong();
    private final AtomicLong unblocks = new AtomicLong();
    private final IdleStrategy idle = new BackoffIdleStrategy(16, 8, 1_000, 100_000);
    // One message buffer per sending thread, as large as any peer's largest message: sends allocate none.
    private final ThreadLocal<ByteBuffer> messages =
        ThreadLocal.withInitial(() -> ByteBuffer.allocate(RING_BYTES / 8).order(ByteOrder.LITTLE_ENDIAN));
    private long stuckSinceNs = -1;
    private final List<Message> polled = new ArrayList<>(); // copied out of the ring, then dispatched
    // Agrona reads and writes the rings through raw addresses, which nothing guards once unmapped: a
    // thread touches a ring only between enter() and exit(), and close() unmaps only when none does
    // (a shutdown hook closes while application threads still poll and send).
    private final AtomicInteger inRing = new AtomicInteger();
    private volatile boolean closed;

    private record Peer(MappedSegment file, ManyToOneRingBuffer ring) {
    }

    private record Message(int type, byte[] bytes) {
    }

    private ShmMailbox(Path dir, Namespace namespace, String entity, MappedSegment file, NamespaceLock lock) {
        this.namespaceLock = lock;
        this.livenessFd = Posix.open(file.path(), Posix.O_RDONLY | Posix.O_NOFOLLOW | Posix.O_CLOEXEC, 0);
        Posix.flock(livenessFd, Posix.LOCK_EX | Posix.LOCK_NB, file.path());
        this.dir = dir;
        this.namespace = namespace;
        this.entity = entity;
        this.file = file;
        this.inbox = ring(file);
    }

    /**
     * Creates this entity's mailbox.
     *
     * @throws ConfigurationException when the JVM lacks the export Agrona needs
     */
    public static ShmMailbox open(Path dir, Namespace namespace, String entity) {
        checkAgronaAccess();
        NamespaceLock lock = NamespaceLock.acquire(dir, namespace);
        MappedSegment file = null;
        boolean ok = false;
        try {
            file = MappedSegment.create(dir, ShmNames.mailbox(namespace, entity), FILE_BYTES);
            ShmMailbox mailbox = new ShmMailbox(dir, namespace, entity, file, lock);
            ShutdownCleanup.register(mailbox);
            ok = true;
            return mailbox;
        } finally {
            if (!ok) {
                if (file != null) {
                    file.close();
                }
                lock.close();
            }
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
     * reported to it ({@link TensorTransport#sentTo}), and it learns to check consumers' liveness, so it
     * frees what it sent to a consumer that died.
     */
    public void attach(TensorTransport transport) {
        this.producer = transport;
        transport.consumerLiveness(this::isAlive);
    }

    /**
     * Whether {@code peer}'s process is alive: its mailbox exists and someone holds the exclusive lock its
     * owner takes for its lifetime (the kernel drops it when the process dies, even by SIGKILL).
     */
    public boolean isAlive(String peer) {
        String path = dir.resolve(ShmNames.mailbox(namespace, peer)).toString();
        int fd;
        try {
            fd = Posix.open(path, Posix.O_RDONLY | Posix.O_NOFOLLOW | Posix.O_CLOEXEC, 0);
        } catch (io.mstar.transport.NativeCallException e) {
            return false;
        }
        try {
            return !Posix.flock(fd, Posix.LOCK_SH | Posix.LOCK_NB, path);
        } finally {
            Posix.close(fd, path); // also drops the probe's shared lock, if it got one
        }
    }

    /** Waits until {@code peer}'s mailbox exists (it is starting), or the timeout passes. */
    public boolean awaitPeer(String peer, Duration timeout) throws InterruptedException {
        Path path = dir.resolve(ShmNames.mailbox(namespace, peer));
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!Files.exists(path)) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    @Override
    public void sendDescriptors(String toEntity, List<TensorDescriptor> descriptors) {
        sendBatched(toEntity, DESCRIPTORS, descriptors, DescriptorCodec::encodedLength,
            (message, d) -> message.position(message.position()
                + DescriptorCodec.encode(d, MemorySegment.ofArray(message.array()), message.position())));
        TensorTransport attached = producer;
        if (attached != null) {
            attached.sentTo(toEntity, descriptors.stream().map(TensorDescriptor::uuid).toList());
        }
    }

    @Override
    public void sendAcks(String toEntity, Collection<UUID> uuids) {
        sendBatched(toEntity, ACKS, uuids, uuid -> 16,
            (message, uuid) -> message.putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits()));
    }

    // Packs items into as few ring messages as the ring's message limit allows, in order.
    private <T> void sendBatched(String toEntity, int type, Collection<T> items, ToIntFunction<T> length,
                                 BiConsumer<ByteBuffer, T> write) {
        Peer peer = peer(toEntity);
        int max = peer.ring.maxMsgLength();
        ByteBuffer message = messages.get();
        int count = 0;
        for (T item : items) {
            if (count > 0 && message.position() + length.applyAsInt(item) > max) {
                flush(peer, type, message, count, toEntity);
                count = 0;
            }
            if (count == 0) {
                startMessage(message);
            }
            write.accept(message, item);
            count++;
        }
        if (count > 0) {
            flush(peer, type, message, count, toEntity);
        }
    }

    private void startMessage(ByteBuffer message) {
        message.clear();
        message.put((byte) entity.length()).put(entity.getBytes(StandardCharsets.US_ASCII)).putShort((short) 0);
    }

    private void flush(Peer peer, int type, ByteBuffer message, int count, String toEntity) {
        message.putShort(1 + entity.length(), (short) count);
        UnsafeBuffer source = new UnsafeBuffer(message.array(), 0, message.position());
        long deadline = System.nanoTime() + SEND_TIMEOUT_NS;
        enter();
        try {
            while (!peer.ring.write(type, source, 0, message.position())) {
                if (closed) {
                    throw closedException();
                }
                if (System.nanoTime() > deadline) {
                    throw new MstarTransportException("mailbox full: entity=" + toEntity + " took no message for "
                        + SEND_TIMEOUT_NS / 1_000_000_000L + " s; is it polling its mailbox?");
                }
                Thread.onSpinWait();
            }
        } finally {
            exit();
        }
    }

    /** Polls from one thread at a time (the ring has one reader); the listener runs outside the ring. */
    @Override
    public int poll(Listener listener, int limit) {
        int read;
        enter();
        try {
            read = inbox.read((type, buffer, index, length) -> {
                byte[] bytes = new byte[length];
                buffer.getBytes(index, bytes);
                polled.add(new Message(type, bytes));
            }, limit);
            if (read == 0) {
                unblockIfStuck();
            } else {
                stuckSinceNs = -1;
            }
        } finally {
            exit();
        }
        try {
            for (Message m : polled) {
                try {
                    dispatch(m.type, m.bytes, listener);
                } catch (RuntimeException e) {
                    badMessages.incrementAndGet();
                    LOG.warn("mailbox message refused: entity={}, type={}, length={}: {}", entity, m.type,
                        m.bytes.length, e.toString());
                }
            }
        } finally {
            polled.clear();
        }
        return read;
    }

    @Override
    public int receive(Listener listener, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        idle.reset();
        while (true) {
            int read = poll(listener, 64);
            if (read > 0 || System.nanoTime() > deadline) {
                return read;
            }
            idle.idle();
        }
    }

    // A record claimed and never committed (its writer died) leaves the producer position ahead for good.
    private void unblockIfStuck() {
        if (inbox.producerPosition() == inbox.consumerPosition()) {
            stuckSinceNs = -1;
            return;
        }
        long now = System.nanoTime();
        if (stuckSinceNs < 0) {
            stuckSinceNs = now;
        } else if (now - stuckSinceNs > UNBLOCK_AFTER_MS * 1_000_000L && inbox.unblock()) {
            unblocks.incrementAndGet();
            stuckSinceNs = -1;
            LOG.warn("mailbox unblocked a record its writer never committed (the writer died?): entity={}", entity);
        }
    }

    private void dispatch(int type, byte[] bytes, Listener listener) {
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        int n = Byte.toUnsignedInt(in.get());
        if (n == 0 || n > 64 || in.remaining() < n + 2) {
            throw new DescriptorFormatException("sender", "bad sender name length " + n);
        }
        byte[] name = new byte[n];
        in.get(name);
        String from = new String(name, StandardCharsets.US_ASCII);
        if (!ShmNames.ENTITY.matcher(from).matches()) {
            throw new DescriptorFormatException("sender", "not an entity name");
        }
        int count = Short.toUnsignedInt(in.getShort());
        if (type == ACKS) {
            if (in.remaining() != 16 * count) {
                throw new DescriptorFormatException("acks", count + " uuids need " + 16 * count + " bytes, found " + in.remaining());
            }
            List<UUID> uuids = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                uuids.add(new UUID(in.getLong(), in.getLong()));
            }
            listener.acks(from, uuids);
        } else if (type == DESCRIPTORS) {
            MemorySegment records = MemorySegment.ofArray(bytes);
            long p = in.position();
            List<TensorDescriptor> descriptors = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                int length = DescriptorCodec.recordLength(records, p, bytes.length - p);
                descriptors.add(DescriptorCodec.decode(records, p, length, namespace));
                p += length;
            }
            if (p != bytes.length) {
                throw new DescriptorFormatException("length", (bytes.length - p) + " trailing bytes after " + count + " descriptors");
            }
            listener.descriptors(from, descriptors);
        } else {
            throw new DescriptorFormatException("type", "unknown message type " + type);
        }
    }

    private void enter() {
        inRing.incrementAndGet();
        if (closed) { // read after the increment: close() sets it before it waits for inRing to drain
            inRing.decrementAndGet();
            throw closedException();
        }
    }

    private void exit() {
        inRing.decrementAndGet();
    }

    private IllegalStateException closedException() {
        return new IllegalStateException("mailbox is closed: entity=" + entity);
    }

    private Peer peer(String toEntity) {
        Peer known = peers.get(toEntity);
        if (known != null) {
            return known; // its ring is used only between enter() and exit()
        }
        synchronized (this) { // as close(): no peer is mapped after close() unmapped the others
            if (closed) {
                throw closedException();
            }
            return peers.computeIfAbsent(ShmNames.checkEntity(toEntity), this::mapPeer);
        }
    }

    private Peer mapPeer(String peer) {
        MappedSegment peerFile;
        try {
            peerFile = MappedSegment.openPeer(dir, ShmNames.mailbox(namespace, peer), FILE_BYTES, true);
        } catch (SegmentAccessException e) {
            throw new SegmentAccessException("no mailbox for entity " + peer + " (is it running in this deployment?): "
                + e.getMessage(), e);
        }
        return new Peer(peerFile, ring(peerFile));
    }

    private static ManyToOneRingBuffer ring(MappedSegment file) {
        return new ManyToOneRingBuffer(new UnsafeBuffer(file.memory().address(), FILE_BYTES));
    }

    /** Messages that could not be decoded or whose listener threw. */
    public long badMessages() {
        return badMessages.get();
    }

    /** Times a record abandoned by a dead writer was skipped. */
    public long unblocks() {
        return unblocks.get();
    }

    public String entity() {
        return entity;
    }

    /** Unmaps the peers' mailboxes and removes our own. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        ShutdownCleanup.unregister(this);
        while (inRing.get() > 0) { // each holder leaves within one ring operation or one write attempt
            Thread.onSpinWait();
        }
        peers.values().forEach(p -> p.file.unmap());
        peers.clear();
        try {
            file.close();
        } finally {
            Posix.close(livenessFd, file.path());
            namespaceLock.close(); // after our mailbox file is gone
        }
    }
}
