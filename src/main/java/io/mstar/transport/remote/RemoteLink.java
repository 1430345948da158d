package io.mstar.transport.remote;

import io.aeron.Publication;
import io.aeron.Subscription;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
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

/**
 * This process's end of the cross-node path, which the mailbox routes to for entities on other nodes
 * ({@link RemoteConfig}). Sending: each tensor goes once over Aeron UDP to the entity's endpoint, read in
 * place from its slot (START, DATA chunks, END with its CRC32C: {@link TensorSender}); the
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
    private static final long CHECK_INTERVAL_NS = 100_000_000L;
    private static final long CONFIRM_WAIT_NS = 1_000_000_000L;
    /** Sends are reported in windows of a fraction of the timeout: a timeout frees only its own window's. */
    static final int WINDOWS_PER_TIMEOUT = 4;

    /** A tensor or an ACK from another node, for the local mailbox's poll; {@code descriptor} null for an ACK. */
    private record Inbound(String from, TensorDescriptor descriptor, long ackMsb, long ackLsb) {
    }

    /**
     * A tensor sent and not yet confirmed, with the key its consumer was reported under
     * ({@code consumer@window}). {@code sentAt} stays MAX_VALUE until its last message is out.
     */
    private static final class Pending {
        final String key;
        volatile long sentAt = Long.MAX_VALUE;

        Pending(String key) {
            this.key = key;
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
    private final TensorSender sender;
    private final Map<UUID, Pending> pending = new ConcurrentHashMap<>();
    private final Map<String, Long> goneWindows = new ConcurrentHashMap<>(); // "consumer@window" -> window
    private final Set<String> senders = ConcurrentHashMap.newKeySet(); // entities whose tensors landed here
    private final Queue<Inbound> inbound = new ConcurrentLinkedQueue<>();
    private final MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]); // poller's
    private int delivering; // records being handed to a listener now (more than one when it polls again)
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
        this.sender = new TensorSender(config, entity, node.aeron(), arena, closer::isClosed);
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
     *                                endpoint for the confirmations, or a standalone driver is not there
     */
    public static RemoteLink start(Deployment deployment) {
        // Registered as it starts: a stop at any instant closes the driver, which removes its directory.
        return ShutdownCleanup.registerNew(() -> startUnregistered(deployment));
    }

    private static RemoteLink startUnregistered(Deployment deployment) {
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
        TensorSender.Peer peer = sender.peer(to);
        synchronized (peer) {
            String key = to + "@" + Long.toHexString(window(System.nanoTime()));
            for (TensorDescriptor d : descriptors) {
                if (closer.isClosed()) {
                    throw new IllegalStateException("the cross-node path is closed: entity=" + entity);
                }
                Pending entry = new Pending(key);
                pending.put(d.uuid(), entry); // before any byte leaves: the confirmation may come back at once
                boolean sent = false;
                try {
                    sender.send(peer, d);
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
            return key;
        }
    }

    private long window(long nanoTime) {
        return nanoTime / Math.max(1, timeoutNs / WINDOWS_PER_TIMEOUT) & Long.MAX_VALUE;
    }

    /** Waits until a receiver of {@code to} is connected, or the timeout passes. */
    public boolean awaitPeer(String to, Duration timeout) throws InterruptedException {
        return sender.awaitConnected(to, timeout);
    }

    /**
     * Whether what was reported under {@code key} ({@code entity@window}, from {@link #send}) may still land:
     * false once a tensor sent to that entity in that window timed out; for a bare entity, whether a receiver
     * of it is connected.
     */
    public boolean isAlive(String key) {
        return key.indexOf('@') < 0 ? sender.peer(key).publication.isConnected() : !goneWindows.containsKey(key);
    }

    /** The local consumer's ACKs for tensors that landed here: frees their slots. */
    public void ackLanded(Collection<UUID> uuids) {
        arena.ack(uuids);
    }

    /** As {@link #ackLanded(Collection)}, for one. */
    public void ackLanded(long msb, long lsb) {
        arena.records().ack(msb, lsb);
    }

    /**
     * Hands up to {@code limit} tensors and ACKs from other nodes to the mailbox's listener (one of the two is
     * null), on the mailbox's polling thread; returns how many. A listener that throws has that item logged and
     * counted ({@code RemoteStats.refused}), and the rest go on.
     */
    public int deliver(TensorChannel.Listener objects, TensorChannel.RecordListener records, int limit) {
        int delivered = 0;
        Inbound in;
        while (delivered < limit && (in = inbound.poll()) != null) {
            delivered++;
            try {
                if (in.descriptor() == null) {
                    if (objects != null) {
                        objects.acks(in.from(), List.of(new UUID(in.ackMsb(), in.ackLsb())));
                    } else {
                        records.ack(in.from(), in.ackMsb(), in.ackLsb());
                    }
                } else if (objects != null) {
                    objects.descriptors(in.from(), List.of(in.descriptor()));
                } else {
                    // A listener that polls again (nested) must not overwrite the record its caller still reads.
                    MemorySegment out = delivering++ == 0 ? record
                        : MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
                    try {
                        records.descriptor(in.from(), out, 0, DescriptorCodec.encode(in.descriptor(), out, 0));
                    } finally {
                        delivering--;
                    }
                }
            } catch (RuntimeException e) {
                counters.refused.incrementAndGet();
                LOG.warn("message from another node refused: entity={}, from={}: {}", entity, in.from(), e.toString());
            }
        }
        return delivered;
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
        // Even while closing: a consumer that read the tensor and exited at once would otherwise leave its
        // producer to time it out (close waits for this thread, at most CONFIRM_WAIT_NS more).
        while (to.offer(confirmation, 0, length) < 0) {
            if (System.nanoTime() > deadline) {
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
        ShutdownCleanup.unregister(this);
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
