package io.mstar.transport.remote;

import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.lifecycle.ShutdownCleanup;
import io.mstar.transport.liveness.SlotHolds;
import io.mstar.transport.remote.RemoteProtocol.Refusal;
import io.mstar.transport.remote.RemoteProtocol.TensorHeader;
import io.mstar.transport.shm.MappedView;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * This process's end of the cross-node path, which the mailbox routes to for entities on other nodes
 * ({@link RemoteConfig}). Sending: each tensor goes over an authenticated TCP connection to its entity
 * ({@link OutboundConnection}, made by the {@link Dialer}, which waits through a partition), its bytes written from
 * its slot; the receiving node's LANDED comes back as
 * the consumer's ACK, which frees the slot as soon as the remote node holds the bytes. A tensor not
 * confirmed within {@value RemoteConfig#TIMEOUT_S} marks its consumer's node gone for the tensors sent in the
 * same window ({@link PendingTensors}): the transport attached to the mailbox frees
 * them and the endpoint reports each one, in doubt or not as its bytes left or not; a tensor the receiver refused
 * is reported at once.
 *
 * <p>Receiving: connections from the entities the map places elsewhere ({@link InboundConnection}); tensors
 * land in a transport of this process's own and reach the local consumer through its mailbox's poll, from the
 * sending entity (as the authenticated connection names it); the consumer's ACK frees the landing slot here.
 *
 * <p>One class on purpose: sending, landing and the timers share one lifecycle (a close ends all three on the
 * event loop at once) and one set of counters; the connections and their dialing, the queue of sends waiting for a
 * connection, the pending table, the reposts, what landed per sender, the landing queue, the caps and the handshake
 * are classes of their own.
 */
public final class RemoteLink implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    private final RateLimitedWarnings warnings = new RateLimitedWarnings(LOG);
    private static final long CHECK_INTERVAL_MS = 100;
    private static final long HANDSHAKE_TIMEOUT_MAX_NS = 5_000_000_000L;
    /**
     * Test-only seam: {@code -Dmstar.test.noWriteHold=true} neither holds a slot while its write is queued nor
     * closes a timed-out connection, so a test can show that these are what keep a reused slot off the wire.
     */
    static final boolean NO_WRITE_HOLD = Boolean.getBoolean("mstar.test.noWriteHold");
    /**
     * How many timeouts of a sender's time a receiver remembers what landed from it ({@link DuplicateWindow}); a
     * silence of the sender counts as one timeout at most.
     */
    static final int DUPLICATE_WINDOW_TIMEOUTS = 6;

    /** Told, on the link's thread, of each tensor sent from here that a remote node refused or did not confirm. */
    public interface RefusalListener {
        void refused(String consumer, long msb, long lsb, String why);

        /**
         * Not confirmed within the timeout, and about to be freed: {@code bytesLeft} when all of it may have
         * reached the consumer's node (which may have handed it over), else none of it did, or not all.
         */
        void timedOut(String consumer, long msb, long lsb, boolean bytesLeft, String why);

        /**
         * A tensor that waited in the link's queue for a connection that was not up by its timeout (or that refused
         * this node in its handshake: a {@code PeerRejectedException}): none of it left; to be reported and freed.
         */
        void unreachable(String consumer, long msb, long lsb, PeerUnavailableException why);
    }

    private final RemoteConfig config;
    private final String entity;
    private final byte[] entityAscii;
    private final long timeoutNs;
    private final long strictWaitNs;
    private final Handshake handshake;
    private final TcpCarrier carrier;
    private final TensorTransport arena; // lands other nodes' tensors; reads ours in place to send them
    private final RemoteCounters counters = new RemoteCounters();
    private final Dialer dialer; // our connections to other nodes' entities
    private final PendingTensors pending;
    private final Landings landings;
    private final Reposts reposts;
    private final InboundQueue inbound;
    private final ConnectionGate gate;
    private volatile RefusalListener refusals;
    private volatile SlotHolds holds = (msb, lsb) -> SlotHolds.NONE; // the producer's slots, held while written
    private final CloseOnce closer = new CloseOnce();
    // Writers of the tensors queued while their connection was not up: one per peer at a time, gone when idle.
    private final ExecutorService writers = Executors.newCachedThreadPool(
        Thread.ofPlatform().daemon().name("mstar-remote-send-", 0).factory());

    private RemoteLink(Deployment deployment, TensorTransport arena, Placements placements) {
        this.config = deployment.config().remote();
        this.entity = deployment.entity();
        this.entityAscii = entity.getBytes(StandardCharsets.US_ASCII);
        this.timeoutNs = config.timeout().toNanos();
        TransportConfig transport = deployment.config();
        this.strictWaitNs = transport.spill() ? 0 : transport.fullTimeout().toNanos();
        byte[] secret = config.secret();
        this.handshake = new Handshake(secret == null ? new byte[0] : secret);
        this.gate = new ConnectionGate(placements, counters);
        this.pending = new PendingTensors(timeoutNs, counters, config);
        this.landings = new Landings(config.maxInFlightBytes(), config.maxInFlightTensors(),
            DUPLICATE_WINDOW_TIMEOUTS * timeoutNs, timeoutNs);
        this.reposts = new Reposts();
        this.inbound = new InboundQueue(entity, counters);
        this.arena = arena;
        this.carrier = new TcpCarrier(config);
        this.dialer = new Dialer(this, config, carrier, timeoutNs, closer::isClosed);
    }

    /**
     * Starts this process's end: its landing transport, its event loop and, with {@value RemoteConfig#LISTEN},
     * its listening socket.
     *
     * @throws ConfigurationException when no secret is set (and {@value RemoteConfig#INSECURE} is not), the map
     *                                does not place this entity, a host does not resolve, or the port is taken
     */
    public static RemoteLink start(Deployment deployment) {
        return ShutdownCleanup.registerNew(() -> startUnregistered(deployment));
    }

    private static RemoteLink startUnregistered(Deployment deployment) {
        TcpCarrier.requireNetty(); // a missing optional dependency is named before any knob is checked
        RemoteConfig config = deployment.config().remote();
        if (config.secret() == null && !config.insecure()) {
            throw new ConfigurationException("the cross-node path needs a secret that every node of the deployment"
                + " holds: set " + RemoteConfig.SECRET_FILE + " (a file only its owner reads), " + RemoteConfig.SECRET
                + " or " + TransportConfig.DEPLOYMENT_TOKEN + " (at least 128 bits: 32 hex digits, 22 base64"
                + " characters); or " + RemoteConfig.INSECURE + "=1 to let anyone who reaches the port in"
                + (config.secretSource() == null ? "" : "; found " + config.secretSource()));
        }
        if (config.endpointOf(deployment.entity()) == null) {
            throw new ConfigurationException(RemoteConfig.ENTITIES + " does not place entity=" + deployment.entity()
                + ": add it (at " + (config.listen() == null ? "this node's address" : config.listen()) + "); other"
                + " nodes accept connections only from entities the map places at the connecting address");
        }
        Map<String, String> hosts = new HashMap<>();
        config.entities().forEach((name, endpoint) -> hosts.put(name, TcpCarrier.host(endpoint)));
        Placements placements = new Placements(hosts); // names resolved again at every connect and accept
        hosts.forEach((name, host) -> {
            if (placements.of(name).isEmpty()) {
                LOG.warn("{} places entity={} at host {}, which does not resolve yet: sends to it wait for it, and its"
                    + " connections are refused until it does", RemoteConfig.ENTITIES, name, host);
            }
        });
        if (config.insecure() && config.secret() == null) {
            LOG.warn("the cross-node path runs WITHOUT authentication ({}=1): any process that reaches {} can send"
                + " tensors as any entity of the map from that entity's address; set {} for production",
                RemoteConfig.INSECURE, config.listen(), RemoteConfig.SECRET_FILE);
        }
        TensorTransport arena = TensorTransports.create(landingDeployment(deployment), false);
        if (arena instanceof ArenaTransport landing) {
            landing.publishAs("landing"); // its entity's own arena shows beside it in the stats
        }
        RemoteLink link = null;
        try {
            link = new RemoteLink(deployment, arena, placements);
            RemoteLink self = link;
            if (config.listen() != null) {
                link.carrier.listen(TcpCarrier.address(config.listen()),
                    () -> new InboundConnection(self));
            }
            link.carrier.group().scheduleAtFixedRate(
                () -> self.pending.expire(self::closeConnection, self::timedOut),
                CHECK_INTERVAL_MS, CHECK_INTERVAL_MS, TimeUnit.MILLISECONDS);
            LOG.info("cross-node path up: entity={}, listen={}, remote entities={}, timeout={} s, {}, secret from {}",
                link.entity, config.listen(), config.entities(), config.timeout().toMillis() / 1e3,
                link.carrier.describe(), config.secret() == null ? "nowhere (insecure)" : config.secretSource());
            return link;
        } catch (RuntimeException e) {
            if (link != null) {
                link.carrier.close();
            }
            arena.close();
            throw e;
        }
    }

    // Landings never wait inside the ladder (that would stop the event loop): a full arena spills at once, or
    // in strict mode fails at once and the connection stops reading and tries again (strictWaitNs).
    private static Deployment landingDeployment(Deployment d) {
        TransportConfig c = d.config();
        TransportConfig landing = new TransportConfig(c.mode(), c.segmentMb(), c.maxSegments(), Duration.ZERO, c.spill(),
            Duration.ZERO, c.pin(), c.pinMaxMb(), c.slotTtl(), c.statsInterval(), c.publishStats(), c.reclaimInterval(), c.nodeMaxMb(), c.stallWarn(), c.shmDir(),
            c.deploymentToken(), c.cudartPath(), c.remote());
        return d.withConfig(landing);
    }

    /** Whether the mailbox routes sends to {@code entity} here: it runs on another node. */
    public boolean isRemote(String entity) {
        return config.isRemote(entity);
    }

    /** Whether ACKs to {@code entity} are for tensors that landed here from it. */
    public boolean landsFrom(String entity) {
        return landings.from(entity) || config.isRemote(entity);
    }

    /**
     * The producer transport whose slots this link sends from: each is held until the socket has taken its last
     * byte or its connection closed, so it is never reused while a write may still read it.
     */
    public void holdSlotsOf(SlotHolds producer) {
        this.holds = producer;
    }

    /** Where refusals of tensors sent from here are told (the endpoint); without one they time out. */
    public void onRefused(RefusalListener listener) {
        this.refusals = listener;
    }

    /**
     * Sends tensors to an entity on another node, one after the other; returns the key to report them
     * under to an attached transport ({@link #isAlive}). With a {@link RefusalListener} (an endpoint's), a send
     * never waits for the connection: while it is not up (being made, or through a partition) the tensors queue,
     * in order, and a thread of the link's writes them once it is, or tells the listener of each one whose timeout
     * passed first ({@link RefusalListener#unreachable}).
     *
     * @throws PeerUnavailableException without a {@link RefusalListener}, when the entity cannot be reached and
     *                                  authenticated, or takes no data, within the timeout; the tensors not sent
     *                                  yet stay in flight, as with a local peer. With one, each tensor that could
     *                                  not be handed over is told to it instead, and those handed over before
     *                                  stay in flight: a tensor is decided on its own
     */
    public String send(String to, List<TensorDescriptor> descriptors) {
        if (closer.isClosed()) {
            throw new IllegalStateException("the cross-node path is closed: entity=" + entity);
        }
        Dialer.Peer peer = dialer.peer(to);
        String key = pending.keyOf(to);
        if (refusals != null && (!peer.isReady() || !peer.queue.isEmpty())) {
            queue(peer, descriptors, key);
            return key;
        }
        synchronized (peer) {
            long deadline = System.nanoTime() + timeoutNs;
            for (int k = 0; k < descriptors.size(); k++) {
                try {
                    write(peer, descriptors.get(k), key, deadline, null);
                } catch (PeerUnavailableException e) {
                    if (refusals == null) {
                        throw e;
                    }
                    // Each tensor is decided on its own: those handed over before stay in flight (confirmed, or in
                    // doubt at their timeout); this one and the rest never left, a definite failure each.
                    for (int j = k; j < descriptors.size(); j++) {
                        UUID u = descriptors.get(j).uuid();
                        refusals.unreachable(peer.entity, u.getMostSignificantBits(), u.getLeastSignificantBits(), e);
                    }
                    break;
                }
            }
            return key;
        }
    }

    // Behind what waits already, all of one send together; the writer runs until the queue is empty.
    private void queue(Dialer.Peer peer, List<TensorDescriptor> descriptors, String key) {
        long deadline = System.nanoTime() + timeoutNs;
        // Pending from now: a window that times out while they wait gives them up (a compare-and-set each), and
        // the writer then never writes them; one the writer handed first is in doubt instead.
        List<SendQueue.Queued> batch = descriptors.stream().map(d -> new SendQueue.Queued(d, key, deadline,
            pending.add(d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(), peer.entity, key)))
            .toList();
        boolean queued = false;
        try {
            queued = peer.queue.add(batch, deadline);
            if (!queued) {
                throw new PeerUnavailableException(peer.entity, "entity=" + peer.entity + " took no data for the"
                    + " timeout: " + SendQueue.MAX_TENSORS + " tensors wait for its connection");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PeerUnavailableException(peer.entity, "interrupted while sending to entity=" + peer.entity);
        } finally {
            if (!queued) {
                descriptors.forEach(d -> pending.remove(d.uuid().getMostSignificantBits(),
                    d.uuid().getLeastSignificantBits(), peer.entity));
            }
        }
        peer.queue.drainOn(writers, q -> writeQueued(peer, q));
    }

    // One queued tensor, on the link's writer for its peer; false when the link closes (the writer stops).
    private boolean writeQueued(Dialer.Peer peer, SendQueue.Queued q) {
        TensorDescriptor d = q.descriptor();
        long msb = d.uuid().getMostSignificantBits();
        long lsb = d.uuid().getLeastSignificantBits();
        try {
            synchronized (peer) {
                write(peer, d, q.key(), q.deadlineNs(), q.bytes());
            }
        } catch (PeerUnavailableException e) {
            refusals.unreachable(peer.entity, msb, lsb, e);
        } catch (RuntimeException e) {
            if (closer.isClosed()) {
                return false; // the endpoint closes too, and tells what stays in flight
            }
            LOG.error("could not send a tensor to entity={}: {}", peer.entity, e.toString(), e);
            refusals.unreachable(peer.entity, msb, lsb, new PeerUnavailableException(peer.entity,
                "could not send it to entity=" + peer.entity + ": " + e));
        }
        return true;
    }

    // One tensor on the peer's connection, made (and waited for) as needed; the caller holds the peer. `queued`:
    // its bytes' state since it was queued (pending already), or null for a tensor written as it is sent.
    private void write(Dialer.Peer peer, TensorDescriptor d, String key, long deadline, PendingTensors.Bytes queued) {
        if (closer.isClosed()) {
            throw new IllegalStateException("the cross-node path is closed: entity=" + entity);
        }
        String to = peer.entity;
        long msb = d.uuid().getMostSignificantBits();
        long lsb = d.uuid().getLeastSignificantBits();
        ReceivedTensor view = null;
        boolean written = false;
        try {
            OutboundConnection connection = dialer.connection(peer, deadline);
            // pending before a byte leaves: LANDED may be quick
            PendingTensors.Bytes bytes = queued != null ? queued : pending.add(msb, lsb, to, key);
            view = heldView(d, msb, lsb);
            connection.write(d, reposts.firstOf(d.uuid()), view, bytes, deadline);
            written = true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PeerUnavailableException(to, "interrupted while sending to entity=" + to);
        } finally {
            if (!written) {
                if (view != null) {
                    view.close();
                }
                pending.remove(msb, lsb, to);
            }
        }
        counters.tensorsSent.incrementAndGet();
        counters.bytesSent.addAndGet(d.nbytes());
    }

    /**
     * The tensor of uuid {@code msb, lsb}, about to be sent, repeats the one the last outcome named
     * {@code inDoubtMsb, inDoubtLsb}: it goes under that tensor's first uuid, so that the consumer's node, which
     * remembers what landed from here for {@value #DUPLICATE_WINDOW_TIMEOUTS} timeouts, hands it over only if the
     * first never landed ({@link DuplicateWindow}).
     */
    public void sendsAgain(long msb, long lsb, long inDoubtMsb, long inDoubtLsb) {
        reposts.add(msb, lsb, inDoubtMsb, inDoubtLsb);
    }

    // The slot's bytes to write, held until the write is done or failed (closing the view lets go).
    private ReceivedTensor heldView(TensorDescriptor d, long msb, long lsb) {
        SlotHolds.Hold hold = NO_WRITE_HOLD ? SlotHolds.NONE : holds.hold(msb, lsb);
        boolean ok = false;
        try {
            MappedView view = (MappedView) arena.receive(d);
            ok = true;
            return new MappedView(d, view.data(), () -> {
                try {
                    view.close();
                } finally {
                    hold.close();
                }
            }, view::checkIntact);
        } finally {
            if (!ok) {
                hold.close();
            }
        }
    }

    /**
     * A tensor whose slot was reused before its bytes were checksummed: not sent, and the producer is told
     * (counted in staleReads where the stamp was read).
     */
    void staleHere(String consumer, long msb, long lsb) {
        RefusalListener listener = refusals;
        if (listener != null && pending.remove(msb, lsb, consumer)) {
            listener.refused(consumer, msb, lsb, "its slot was reused before it was sent to " + consumer
                + " (counted in staleReads)");
        }
    }

    // A tensor not confirmed within the timeout, told to the endpoint before it is freed.
    private void timedOut(String consumer, long msb, long lsb, boolean bytesLeft) {
        RefusalListener listener = refusals;
        if (listener != null) {
            long s = timeoutNs / 1_000_000_000L;
            listener.timedOut(consumer, msb, lsb, bytesLeft, bytesLeft
                ? "sent whole to consumer " + consumer + " on another node, which did not confirm it within "
                    + RemoteConfig.TIMEOUT_S + "=" + s + " s: it may have been handed over there (the network or that"
                    + " node failed after it left)"
                : "it did not reach consumer " + consumer + " on another node whole within " + RemoteConfig.TIMEOUT_S
                    + "=" + s + " s (its connection took none of it, or failed before all): it was not handed over");
        }
    }

    /**
     * Closes the connection to an entity whose tensors timed out, before their slots may be freed: its queued
     * writes are discarded (their holds let go) instead of sending a reused slot's bytes later, and the kernel's
     * unsent bytes too (an abortive close), so a tensor given up here does not reach the other node when a
     * partition heals.
     */
    private void closeConnection(String to) {
        if (!NO_WRITE_HOLD) {
            dialer.abort(to);
        }
    }

    /** Connects to {@code to} (again and again while it refuses) until the handshake is done, or the timeout passes. */
    public boolean awaitPeer(String to, Duration timeout) throws InterruptedException {
        return dialer.awaitPeer(to, timeout);
    }

    /**
     * Whether what was reported under {@code key} ({@code entity@window}, from {@link #send}) may still land:
     * false once a tensor sent to that entity in that window timed out; for a bare entity, whether its
     * connection is up.
     */
    public boolean isAlive(String key) {
        if (key.indexOf('@') >= 0) {
            return pending.mayLand(key);
        }
        return dialer.isConnected(key);
    }

    /** The local consumer's ACKs for tensors that landed here: frees their slots. */
    public void ackLanded(Collection<UUID> uuids) {
        arena.ack(uuids);
        uuids.forEach(landings::acked);
    }

    /** As {@link #ackLanded(Collection)}, for one. */
    public void ackLanded(long msb, long lsb) {
        arena.records().ack(msb, lsb);
        landings.acked(new UUID(msb, lsb));
    }

    /**
     * Hands up to {@code limit} tensors and ACKs from other nodes to the mailbox's listener (one of the two is
     * null), on the mailbox's polling thread; returns how many. A listener that throws has that item logged and
     * counted ({@code RemoteStats.refused}), and the rest go on.
     */
    public int deliver(TensorChannel.Listener objects, TensorChannel.RecordListener records, int limit) {
        return inbound.deliver(objects, records, limit);
    }

    /** Whether tensors or ACKs from other nodes wait for {@link #deliver}. */
    public boolean hasInbound() {
        return inbound.hasItems();
    }

    /** Runs {@code wake} whenever a tensor or an ACK from another node is queued for {@link #deliver}. */
    public void onInbound(Runnable wake) {
        inbound.onArrival(wake);
    }

    /** Bytes held in this process's landing arena: tensors landing, or landed and not yet ACKed. */
    long landingBytes() {
        TransportStats stats = arena.statsSummary();
        return stats.arena() == null ? stats.inFlight() : stats.arena().usedBytes();
    }

    public RemoteStats stats() {
        return counters.snapshot(gate.openConnections() + dialer.connected());
    }

    // ---- called by the connections, on the event loop ----

    String entity() {
        return entity;
    }

    byte[] entityAscii() {
        return entityAscii;
    }

    Handshake handshake() {
        return handshake;
    }

    RemoteCounters counters() {
        return counters;
    }

    long timeoutNs() {
        return timeoutNs;
    }

    long idleTimeoutNs() {
        return config.idleTimeout().toNanos();
    }

    long maxInFlightBytes() {
        return config.maxInFlightBytes();
    }

    /** One per link: every connection's warnings about its peer share the once-a-minute windows. */
    RateLimitedWarnings warnings() {
        return warnings;
    }

    long handshakeTimeoutNs() {
        return Math.min(timeoutNs, HANDSHAKE_TIMEOUT_MAX_NS);
    }

    long strictWaitNs() {
        return strictWaitNs;
    }

    ConnectionGate gate() {
        return gate;
    }

    /** The handshake passed: the sender's budget, or null when it has too many connections open already. */
    SenderBudget authenticated(InboundConnection connection, String sender) {
        return gate.authenticated(connection, sender)
            ? landings.budgetOf(sender) : null;
    }

    /** A peer broke the protocol or failed its handshake: closed, counted, logged (at most once a minute). */
    void violation(InetAddress address, String peer, boolean authenticated, String why) {
        if (authenticated) {
            counters.protocolErrors.incrementAndGet();
        }
        gate.refuse(address, peer, "protocol", why);
    }

    TensorClaim claim(TensorHeader header) {
        return arena.claim(header.requestId(), header.dtype(), header.shape());
    }

    DuplicateWindow windowOf(String sender) {
        return landings.windowOf(sender);
    }

    /** A whole tensor from {@code sender}: it goes to the local consumer, its bytes stay on the budget. */
    void landed(String sender, SenderBudget budget, TensorHeader header, TensorDescriptor descriptor) {
        landings.landed(sender, budget, descriptor.uuid(), header.nbytes());
        counters.tensorsReceived.incrementAndGet();
        counters.bytesReceived.addAndGet(header.nbytes());
        inbound.tensor(sender, descriptor);
    }


    /** {@code consumer} holds a tensor this process sent: its ACK for the local poll. */
    void confirmed(String consumer, long msb, long lsb) {
        if (!pending.remove(msb, lsb, consumer)) {
            counters.lateConfirmations.incrementAndGet();
            return;
        }
        counters.landed.incrementAndGet();
        inbound.ack(consumer, msb, lsb);
    }

    /** {@code consumer}'s node dropped a tensor this process sent: the endpoint reports it and frees it. */
    void refusedThere(String consumer, long msb, long lsb, Refusal reason) {
        RefusalListener listener = refusals;
        if (listener == null || !pending.remove(msb, lsb, consumer)) {
            return; // without a listener it times out like a tensor that never arrived
        }
        counters.refusedThere.incrementAndGet();
        listener.refused(consumer, msb, lsb, "consumer " + consumer + " on another node refused it: " + reason.text);
    }

    /** Closes every connection and the listening socket, aborts tensors half landed, closes the landing transport. */
    @Override
    public void close() {
        closer.close(this::release);
    }

    private void release() {
        ShutdownCleanup.unregister(this);
        try {
            writers.shutdownNow(); // a writer waiting for a connection gives up
            carrier.close(); // the event loop ends: no write reads a slot, no landing writes one, after this
        } finally {
            LOG.info("cross-node path closing: entity={} {}", entity, stats().toLogLine());
            arena.close();
        }
    }
}
