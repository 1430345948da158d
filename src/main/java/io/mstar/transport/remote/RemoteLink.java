package io.mstar.transport.remote;

import io.aeron.Publication;
import io.aeron.Subscription;
import io.mstar.transport.ConfigurationException;
import io.mstar.transport.Deployment;
import io.mstar.transport.MstarTransportException;
import io.mstar.transport.PeerUnavailableException;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.lifecycle.CloseOnce;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.zip.CRC32C;

/**
 * This process's end of the cross-node path, which the mailbox routes to for entities on other nodes
 * ({@link RemoteConfig}). Sending: each tensor goes once over Aeron UDP to the entity's endpoint, read in
 * place from its slot (START, DATA chunks of up to Aeron's largest message, END with its CRC32C); the
 * receiving node's confirmation comes back as the consumer's ACK, which frees the slot as soon as the
 * remote node holds the bytes. A tensor not confirmed within {@value RemoteConfig#TIMEOUT_S} marks its
 * consumer's node gone for the tensors sent in the same window ({@link #WINDOWS_PER_TIMEOUT} windows per timeout):
 * the transport attached to the mailbox frees them (as it frees what a dead local consumer held), and the
 * count goes up; tensors of later windows (sent after the node came back) are not touched.
 *
 * <p>Receiving: one thread polls this process's endpoint; tensors land in a transport of this process's
 * own ({@link TensorLanding}) and reach the local consumer through its mailbox's poll, from the sending
 * entity; the consumer's ACK to that entity frees the landing slot here.
 */
public final class RemoteLink implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    /** Aeron's term length for tensor streams: messages (chunks) up to an eighth of it, 2 MiB. */
    static final String DATA_TERM = "16m";
    private static final long CHECK_INTERVAL_NS = 100_000_000L;
    private static final long CONFIRM_WAIT_NS = 1_000_000_000L;
    /** Sends are reported in windows of a fraction of the timeout: a timeout frees only its own window's. */
    static final int WINDOWS_PER_TIMEOUT = 4;

    /** A tensor or an ACK from another node, for the local mailbox's poll; {@code descriptor} null for an ACK. */
    public record Inbound(String from, TensorDescriptor descriptor, long ackMsb, long ackLsb) {
    }

    /**
     * A tensor sent and not yet confirmed, with the key its consumer was reported under. {@code sentAt} stays
     * MAX_VALUE until its last message is out.
     */
    private static final class Pending {
        final String consumer;
        final String key;
        volatile long sentAt = Long.MAX_VALUE;

        Pending(String consumer, String key) {
            this.consumer = consumer;
            this.key = key;
        }
    }

    /** The publication to one remote entity; one tensor at a time on it (its chunks must not interleave). */
    private static final class Peer {
        final String entity;
        final String endpoint;
        final Publication publication;
        final UnsafeBuffer header = new UnsafeBuffer(ByteBuffer.allocateDirect(4096));
        final UnsafeBuffer payload = new UnsafeBuffer(0, 0);

        Peer(String entity, String endpoint, Publication publication) {
            this.entity = entity;
            this.endpoint = endpoint;
            this.publication = publication;
        }
    }

    private final RemoteConfig config;
    private final String entity;
    private final byte[] entityUtf8;
    private final long timeoutNs;
    private final AeronNode node;
    private final TensorTransport arena; // lands other nodes' tensors; reads ours in place to send them
    private final Subscription subscription; // null when this process does not listen
    private final TensorLanding landing;
    private final RemoteCounters counters = new RemoteCounters();
    private final Map<String, Peer> peers = new ConcurrentHashMap<>();
    private final Map<UUID, Pending> pending = new ConcurrentHashMap<>();
    private final Map<String, Long> goneWindows = new ConcurrentHashMap<>(); // "consumer@window" -> window
    private final Set<String> senders = ConcurrentHashMap.newKeySet(); // entities whose tensors landed here
    private final Queue<Inbound> inbound = new ConcurrentLinkedQueue<>();
    private final Map<String, Publication> confirmations = new HashMap<>(); // the link's thread only
    private final UnsafeBuffer confirmation = new UnsafeBuffer(new byte[512]);
    private final Thread thread;
    private volatile boolean running = true;
    private final CloseOnce closer = new CloseOnce();

    private RemoteLink(Deployment deployment, AeronNode node, TensorTransport arena) {
        this.config = deployment.config().remote();
        this.entity = deployment.entity();
        this.entityUtf8 = entity.getBytes(StandardCharsets.UTF_8);
        this.timeoutNs = config.timeout().toNanos();
        this.node = node;
        this.arena = arena;
        this.landing = new TensorLanding(arena, entity, new TensorLanding.Events() {
            @Override
            public void landed(RemoteProtocol.Start start, TensorDescriptor descriptor) {
                onLanded(start, descriptor);
            }

            @Override
            public void confirmed(String consumer, long msb, long lsb) {
                onConfirmed(consumer, msb, lsb);
            }
        }, counters);
        this.subscription = config.listen() == null ? null
            : node.aeron().addSubscription("aeron:udp?endpoint=" + config.listen()
                + "|so-rcvbuf=" + AeronNode.RCVBUF + "|rcv-wnd=" + AeronNode.RCVBUF / 2, streamOf(entity));
        this.thread = new Thread(this::run, "mstar-remote-" + entity);
        this.thread.setDaemon(true);
    }

    /**
     * Starts this process's end: its Aeron client (and embedded driver), its landing transport and, with
     * {@value RemoteConfig#LISTEN}, its endpoint.
     *
     * @throws ConfigurationException when an entity is placed on another node but this process has no
     *                                endpoint for the confirmations, or Aeron is missing
     */
    public static RemoteLink start(Deployment deployment) {
        RemoteConfig config = deployment.config().remote();
        if (config.listen() == null && config.entities().keySet().stream().anyMatch(config::isRemote)) {
            throw new ConfigurationException(RemoteConfig.ENTITIES + " places entities on other nodes, but "
                + RemoteConfig.LISTEN + " is unset: set it to host:port of this node, where the other nodes"
                + " confirm the tensors they receive (and send theirs)");
        }
        AeronNode node = AeronNode.start(deployment);
        TensorTransport arena = null;
        try {
            arena = TensorTransports.create(deployment, false);
            RemoteLink link = new RemoteLink(deployment, node, arena);
            link.thread.start();
            LOG.info("cross-node path up: entity={}, listen={}, remote entities={}, timeout={} s, mtu={}, driver={}",
                link.entity, config.listen(), config.entities(), config.timeout().toMillis() / 1e3, config.mtu(),
                config.aeronDir() == null ? "embedded" : config.aeronDir());
            return link;
        } catch (RuntimeException e) {
            if (arena != null) {
                arena.close();
            }
            node.close();
            throw e;
        }
    }

    /** Aeron stream of an entity's endpoint: tensors to it and confirmations of what it sent. */
    static int streamOf(String entity) {
        return (entity.hashCode() & 0x3fff_ffff) | 1;
    }

    /** Whether the mailbox routes sends to {@code entity} here: it runs on another node. */
    public boolean isRemote(String entity) {
        return config.isRemote(entity);
    }

    /** Whether ACKs to {@code entity} are for tensors that landed here from it. */
    public boolean landsFrom(String entity) {
        return senders.contains(entity) || config.isRemote(entity);
    }

    /**
     * Sends tensors to an entity on another node, one after the other; returns the key to report them
     * under to an attached transport ({@link #isAlive}).
     *
     * @throws PeerUnavailableException when the entity takes no data for the timeout; the tensors not sent
     *                                  yet stay in flight, as with a local peer
     */
    public String send(String to, List<TensorDescriptor> descriptors) {
        Peer peer = peer(to);
        synchronized (peer) {
            String key = to + "@" + Long.toHexString(window(System.nanoTime()));
            for (TensorDescriptor d : descriptors) {
                sendOne(peer, d, key);
            }
            return key;
        }
    }

    private long window(long nanoTime) {
        return nanoTime / Math.max(1, timeoutNs / WINDOWS_PER_TIMEOUT) & Long.MAX_VALUE;
    }

    private void sendOne(Peer peer, TensorDescriptor d, String key) {
        if (closer.isClosed()) {
            throw new IllegalStateException("the cross-node path is closed: entity=" + entity);
        }
        long msb = d.uuid().getMostSignificantBits();
        long lsb = d.uuid().getLeastSignificantBits();
        Pending entry = new Pending(peer.entity, key);
        pending.put(d.uuid(), entry); // before any byte leaves: the confirmation may come back at once
        boolean sent = false;
        try (ReceivedTensor view = arena.receive(d); Arena copy = Arena.ofConfined()) {
            MemorySegment data = view.data();
            if (!data.isNative()) { // a small spilled tensor read as a heap copy
                data = copy.allocate(data.byteSize()).copyFrom(data);
            }
            int length = RemoteProtocol.writeStart(peer.header, msb, lsb, d.nbytes(), d.dtype(), d.shape(),
                entity, peer.entity, d.requestId(), config.listen());
            offer(peer, peer.header, length, null, 0);
            CRC32C crc = new CRC32C();
            long chunk = peer.publication.maxMessageLength() - RemoteProtocol.DATA_HEADER;
            for (long at = 0; at < d.nbytes(); at += chunk) {
                int n = (int) Math.min(chunk, d.nbytes() - at);
                crc.update(data.asSlice(at, n).asByteBuffer());
                RemoteProtocol.writeDataHeader(peer.header, msb, lsb, at);
                peer.payload.wrap(data.address() + at, n);
                offer(peer, peer.header, RemoteProtocol.DATA_HEADER, peer.payload, n);
            }
            RemoteProtocol.writeEnd(peer.header, msb, lsb, d.nbytes(), (int) crc.getValue());
            offer(peer, peer.header, RemoteProtocol.END_LENGTH, null, 0);
            entry.sentAt = System.nanoTime();
            sent = true;
        } finally {
            if (!sent) {
                pending.remove(d.uuid(), entry);
            }
        }
        counters.tensorsSent.incrementAndGet();
        counters.bytesSent.addAndGet(d.nbytes());
    }

    // Offers one message, waiting out back pressure (the receiver's window, its full arena) up to the timeout.
    private void offer(Peer peer, DirectBuffer header, int headerLength, DirectBuffer payload, int payloadLength) {
        IdleStrategy idle = null;
        long start = 0;
        while (true) {
            long result = payload == null ? peer.publication.offer(header, 0, headerLength)
                : peer.publication.offer(header, 0, headerLength, payload, 0, payloadLength);
            if (result > 0) {
                return;
            }
            if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED) {
                throw new MstarTransportException("the publication to entity=" + peer.entity + " at " + peer.endpoint
                    + " is closed (" + (result == Publication.CLOSED ? "closed" : "max position exceeded") + ")");
            }
            if (closer.isClosed()) {
                throw new IllegalStateException("the cross-node path is closed: entity=" + entity);
            }
            if (idle == null) {
                idle = new BackoffIdleStrategy(16, 8, 1_000, 100_000);
                start = System.nanoTime();
            } else if (System.nanoTime() - start > timeoutNs) {
                throw new PeerUnavailableException(peer.entity, "entity=" + peer.entity + " at " + peer.endpoint
                    + " took no data for " + config.timeout().toMillis() / 1e3 + " s ("
                    + (result == Publication.NOT_CONNECTED ? "no receiver connected: is it running and reachable?"
                    : "back-pressured: it does not keep up") + ", " + RemoteConfig.TIMEOUT_S + ")");
            }
            idle.idle();
        }
    }

    private Peer peer(String to) {
        String endpoint = config.endpointOf(to);
        if (endpoint == null || !config.isRemote(to)) {
            throw new IllegalArgumentException("entity=" + to + " is not on another node in " + RemoteConfig.ENTITIES);
        }
        return peers.computeIfAbsent(to, e -> new Peer(e, endpoint, node.aeron().addPublication("aeron:udp?endpoint="
            + endpoint + "|mtu=" + config.mtu() + "|term-length=" + DATA_TERM + "|so-sndbuf=" + AeronNode.SNDBUF,
            streamOf(e))));
    }

    /** Waits until a receiver of {@code entity} is connected, or the timeout passes. */
    public boolean awaitPeer(String to, Duration timeout) throws InterruptedException {
        Peer peer = peer(to);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!peer.publication.isConnected()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    /**
     * Whether what was reported under {@code key} ({@code entity@window}, from {@link #send}) may still land:
     * false once a tensor sent to that entity in that window timed out; for a bare entity, whether a receiver
     * of it is connected.
     */
    public boolean isAlive(String key) {
        return key.indexOf('@') < 0 ? peer(key).publication.isConnected() : !goneWindows.containsKey(key);
    }

    /** The local consumer's ACKs for tensors that landed here: frees their slots. */
    public void ackLanded(Collection<UUID> uuids) {
        arena.ack(uuids);
    }

    /** As {@link #ackLanded(Collection)}, for one. */
    public void ackLanded(long msb, long lsb) {
        arena.ack(msb, lsb);
    }

    /** The next tensor or ACK from another node for the local mailbox, or null. */
    public Inbound poll() {
        return inbound.poll();
    }

    public RemoteStats stats() {
        return counters.snapshot();
    }

    private void run() {
        IdleStrategy idle = new BackoffIdleStrategy(16, 8, 1_000, 100_000);
        long nextCheck = System.nanoTime() + CHECK_INTERVAL_NS;
        while (running) {
            try {
                int work = subscription == null ? 0 : subscription.poll(landing, 64);
                long now = System.nanoTime();
                if (now - nextCheck > 0) {
                    nextCheck = now + CHECK_INTERVAL_NS;
                    expire(now);
                    if (subscription != null) {
                        landing.abortOrphans(session -> subscription.imageBySessionId(session) != null);
                    }
                }
                idle.idle(work);
            } catch (RuntimeException e) {
                LOG.warn("cross-node path: {}", e.toString(), e);
            }
        }
    }

    private void onLanded(RemoteProtocol.Start start, TensorDescriptor descriptor) {
        senders.add(start.from());
        inbound.add(new Inbound(start.from(), descriptor, 0, 0));
        Publication to = confirmations.computeIfAbsent(start.replyTo() + "/" + start.from(), k -> node.aeron()
            .addPublication("aeron:udp?endpoint=" + start.replyTo() + "|mtu=" + config.mtu() + "|term-length=64k",
                streamOf(start.from())));
        int length = RemoteProtocol.writeLanded(confirmation, start.msb(), start.lsb(), entityUtf8);
        long deadline = System.nanoTime() + CONFIRM_WAIT_NS;
        while (to.offer(confirmation, 0, length) < 0) {
            if (System.nanoTime() > deadline || !running) {
                LOG.warn("could not confirm a tensor to entity={} at {}: it frees it after its timeout", start.from(),
                    start.replyTo());
                return;
            }
            Thread.onSpinWait();
        }
    }

    private void onConfirmed(String consumer, long msb, long lsb) {
        Pending entry = pending.remove(new UUID(msb, lsb));
        if (entry == null) {
            counters.lateConfirmations.incrementAndGet();
            return;
        }
        counters.landed.incrementAndGet();
        inbound.add(new Inbound(consumer, null, msb, lsb));
    }

    // A tensor unconfirmed for the timeout: its consumer's node is gone for what was sent to it in that window.
    private void expire(long now) {
        goneWindows.values().removeIf(w -> window(now) - w > 100L * WINDOWS_PER_TIMEOUT); // long since freed
        Set<String> gone = null;
        for (Pending p : pending.values()) {
            if (now - p.sentAt > timeoutNs && p.sentAt != Long.MAX_VALUE) {
                (gone == null ? gone = new HashSet<>() : gone).add(p.key);
            }
        }
        if (gone == null) {
            return;
        }
        for (String key : gone) {
            goneWindows.put(key, Long.parseLong(key.substring(key.indexOf('@') + 1), 16));
            int[] count = {0};
            pending.values().removeIf(p -> p.key.equals(key) && ++count[0] > 0);
            counters.timedOut.addAndGet(count[0]);
            String consumer = key.substring(0, key.indexOf('@'));
            LOG.warn("entity={} at {} confirmed none of {} tensors within {} s: taken as gone for them (an attached"
                + " transport frees them; count in remoteTimedOut)", consumer, config.endpointOf(consumer), count[0],
                config.timeout().toMillis() / 1e3);
        }
    }

    /** Stops the link's thread, aborts tensors half landed, closes the landing transport and Aeron. */
    @Override
    public void close() {
        closer.close(this::release);
    }

    private void release() {
        running = false;
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        LOG.info("cross-node path closing: entity={} {}", entity, counters.snapshot().toLogLine());
        try {
            landing.close();
            arena.close();
        } finally {
            node.close(); // closes the publications and the subscription with the client
        }
    }
}
