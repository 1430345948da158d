package io.mstar.transport.remote;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.exceptions.PeerRejectedException;
import io.mstar.transport.exceptions.PeerUnavailableException;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;

/**
 * This node's connections to the entities other nodes serve: one per entity, made (and authenticated) when a send
 * needs it, from our own placement's host as it resolves now, to the entity's host as it resolves now. A peer that
 * cannot be reached (refused while it restarts, unreachable through a partition) is tried again, backing off,
 * until the send's deadline, so a send fails once, at its deadline, saying since when and why; a peer that
 * refuses our handshake fails the send as rejected.
 */
final class Dialer {
    // A connection closed in its handshake is tried again for this long: the peer's handshake table may have
    // been full for a moment (a stalled handshake yields its place within a second); a wrong secret fails after it.
    private static final long HANDSHAKE_RETRY_NS = 3_000_000_000L;
    private static final long RECONNECT_PAUSE_NS = 100_000_000L;
    // Between two tries to reach a peer that cannot be reached: from RECONNECT_PAUSE_NS, doubling, up to this, so a
    // node that comes back (a link up again, a process restarted) is used within it.
    private static final long RECONNECT_PAUSE_MAX_NS = 500_000_000L;
    // One try's TCP connect: a connect into a partition is not left to the kernel's SYN retransmissions (1, 3, 7 s
    // apart), which would find a link that came back seconds late.
    private static final int CONNECT_TRY_MS = 1000;

    static final class Peer {
        final String entity;
        final String endpoint; // host:port, the host resolved at every connect: a node restarted elsewhere is found
        volatile OutboundConnection connection; // replaced under the peer's lock; isAlive reads it without
        final SendQueue queue = new SendQueue(); // tensors sent while the connection was not up
        // Since when no try reached it (null: the last one did) and the last try's error; under the peer's lock.
        Instant unreachableSince;
        String lastError;

        Peer(String entity, String endpoint) {
            this.entity = entity;
            this.endpoint = endpoint;
        }

        void tried(OutboundConnection c, boolean reached) {
            if (reached) {
                unreachableSince = null;
                return;
            }
            if (unreachableSince == null) {
                unreachableSince = Instant.now();
            }
            lastError = c.whyNotReady();
        }

        boolean isReady() {
            OutboundConnection c = connection;
            return c != null && c.isReady();
        }

        /** What is known of a peer no try reached: since when, and the last try's error. */
        String unreachable() {
            return "unreachable since " + unreachableSince.truncatedTo(ChronoUnit.MILLIS) + " ("
                + Duration.between(unreachableSince, Instant.now()).toMillis() + " ms), last error: " + lastError;
        }
    }

    private final RemoteLink link;
    private final RemoteConfig config;
    private final TcpCarrier carrier;
    private final long timeoutNs;
    private final BooleanSupplier closed;
    private final String localHost; // connections leave from our own placement's host (resolved at each connect)
    private final Map<String, Peer> peers = new ConcurrentHashMap<>();

    Dialer(RemoteLink link, RemoteConfig config, TcpCarrier carrier, long timeoutNs, BooleanSupplier closed) {
        this.link = link;
        this.config = config;
        this.carrier = carrier;
        this.timeoutNs = timeoutNs;
        this.closed = closed;
        String own = config.endpointOf(link.entity());
        this.localHost = own == null ? null : TcpCarrier.host(own);
    }

    Peer peer(String to) {
        String endpoint = config.endpointOf(to);
        if (endpoint == null || !config.isRemote(to)) {
            throw new IllegalArgumentException("entity=" + to + " is not on another node in " + RemoteConfig.ENTITIES);
        }
        return peers.computeIfAbsent(to, e -> new Peer(e, endpoint));
    }

    // Our own placement's host as it resolves now, to leave from; null (any) while it does not resolve yet.
    private InetSocketAddress localAddress() {
        InetSocketAddress local = localHost == null ? null : new InetSocketAddress(localHost, 0);
        return local == null || local.isUnresolved() ? null : local;
    }

    // The peer's connection, made (and authenticated) when there is none; the caller holds the peer. A peer that
    // cannot be reached (refused: restarting; unreachable: a partition) is tried again, backing off, until the
    // deadline: a send fails once, at its deadline, not at every try. A connection closed in its handshake (the
    // peer's handshake table was full for a moment) is tried again for HANDSHAKE_RETRY_NS.
    OutboundConnection connection(Peer peer, long deadline) {
        long retryUntil = Math.min(deadline, System.nanoTime() + HANDSHAKE_RETRY_NS);
        long pause = RECONNECT_PAUSE_NS;
        String refusedBefore = null; // why an earlier try of this call was closed in its handshake
        while (true) {
            OutboundConnection c = peer.connection;
            if (c == null || c.isClosed()) {
                c = new OutboundConnection(link, peer.entity);
                peer.connection = c;
                OutboundConnection made = c;
                int tryMs = (int) Math.max(1, Math.min(CONNECT_TRY_MS, (deadline - System.nanoTime()) / 1_000_000));
                carrier.connect(TcpCarrier.address(peer.endpoint), localAddress(), c, tryMs).addListener(f -> {
                    if (!f.isSuccess()) {
                        made.failed(f.cause());
                    }
                });
            }
            try {
                boolean ready = c.awaitReady(deadline);
                peer.tried(c, ready || c.closedInHandshake());
                if (ready) {
                    return c;
                }
                long now = System.nanoTime();
                if (c.closedInHandshake()) {
                    refusedBefore = c.whyNotReady();
                }
                if (c.closedInHandshake() && now + RECONNECT_PAUSE_NS < retryUntil && !closed.getAsBoolean()) {
                    Thread.sleep(RECONNECT_PAUSE_NS / 1_000_000);
                    continue;
                }
                if (!c.closedInHandshake() && now - deadline < 0 && !closed.getAsBoolean()) {
                    link.warnings().warn("unreachable", peer.entity, "entity=" + peer.entity + " at " + peer.endpoint
                        + " is " + peer.unreachable() + "; sends to it wait for it up to " + RemoteConfig.TIMEOUT_S);
                    Thread.sleep(Math.max(1, Math.min(pause, deadline - now) / 1_000_000));
                    pause = Math.min(2 * pause, RECONNECT_PAUSE_MAX_NS);
                    continue;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            // The deadline can pass while the last try is still in its handshake (a busy node): the peer's last
            // answer was still a refusal, not silence.
            if (c.closedInHandshake() || (refusedBefore != null && !c.isClosed())) {
                String why = "entity=" + peer.entity + " at " + peer.endpoint + " refused this node's connection: "
                    + (c.closedInHandshake() ? c.whyNotReady() : refusedBefore);
                link.warnings().warn("rejected", peer.entity, why + " (sends to it fail REJECTED)");
                throw new PeerRejectedException(peer.entity, why);
            }
            throw new PeerUnavailableException(peer.entity, "entity=" + peer.entity + " at " + peer.endpoint
                + " cannot be reached and authenticated: " + (peer.unreachableSince == null ? c.whyNotReady()
                : peer.unreachable()) + " (" + RemoteConfig.TIMEOUT_S + ")");
        }
    }

    /** Resets the connection to {@code to}, if any: its queued writes and the kernel's unsent bytes are dropped. */
    void abort(String to) {
        Peer peer = peers.get(to);
        OutboundConnection c = peer == null ? null : peer.connection;
        if (c != null) {
            c.abort();
        }
    }

    /** Connects to {@code to} (again and again while it refuses) until the handshake is done, or the timeout passes. */
    boolean awaitPeer(String to, Duration timeout) throws InterruptedException {
        Peer peer = peer(to);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            synchronized (peer) {
                try {
                    connection(peer, Math.min(deadline, System.nanoTime() + timeoutNs));
                    return true;
                } catch (PeerRejectedException e) {
                    throw e; // up and refusing us: waiting does not help
                } catch (PeerUnavailableException e) {
                    if (System.nanoTime() - deadline >= 0) {
                        return false;
                    }
                }
            }
            Thread.sleep(50); // not listening yet: try again
        }
    }

    /** Whether the connection to {@code to} is up. */
    boolean isConnected(String to) {
        Peer peer = peers.get(to);
        return peer != null && peer.isReady();
    }

    /** The connections up now. */
    int connected() {
        int up = 0;
        for (Peer peer : peers.values()) {
            up += peer.isReady() ? 1 : 0;
        }
        return up;
    }
}
