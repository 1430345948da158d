package io.mstar.transport.remote;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Who may hold a connection to this process, on the event loop: only an entity the map places at the
 * connecting address; at most {@value #MAX_HANDSHAKES} connections in their handshake ({@value
 * #MAX_HANDSHAKES_PER_ADDRESS} from one address) and {@value #MAX_CONNECTIONS_PER_SENDER} authenticated ones
 * per entity.
 *
 * <p>A full table does not simply refuse the newcomer, or whoever fills it first (a slowloris from the
 * producer's own address, idle connections opened in an entity's name) would keep the honest out for as
 * long as it likes. A new handshake takes the place of one that has sent nothing useful for {@value
 * #STALLED_HANDSHAKE_MS} ms (honest handshakes take milliseconds), else of one that has not named itself
 * yet, the oldest first: from the same address when that address is at its share, else from the address
 * that holds the most. A new authenticated connection takes the place of its entity's idlest connection,
 * one idle for a second at least.
 * Every refusal is counted and logged at most once a minute per cause and peer.
 */
final class ConnectionGate {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    static final int MAX_HANDSHAKES = 64;
    static final int MAX_HANDSHAKES_PER_ADDRESS = 16;
    static final int MAX_CONNECTIONS_PER_SENDER = 4;
    static final long STALLED_HANDSHAKE_MS = 1000;
    /** A connection that carried something in the last second is in use: it is never evicted. */
    static final long IDLE_BEFORE_EVICTION_MS = 1000;

    private final Placements placements; // entity to the addresses its host resolves to now
    private final RemoteCounters counters;
    private final Map<InetAddress, List<InboundConnection>> handshaking = new HashMap<>();
    private int handshakes;
    private final Map<String, List<InboundConnection>> bySender = new HashMap<>();
    private final RateLimitedWarnings warnings = new RateLimitedWarnings(LOG);
    private final AtomicInteger open = new AtomicInteger();

    ConnectionGate(Placements placements, RemoteCounters counters) {
        this.placements = placements;
        this.counters = counters;
    }

    int openConnections() {
        return open.get();
    }

    /** Whether {@code name} is an entity of the map placed at {@code address}. */
    boolean placedAt(String name, InetAddress address) {
        return placements.contains(name, address)
            || placements.of(name).stream().anyMatch(InetAddress::isAnyLocalAddress) && isLocal(address);
    }

    private static boolean isLocal(InetAddress address) {
        try {
            return address.isLoopbackAddress() || NetworkInterface.getByInetAddress(address) != null;
        } catch (SocketException e) {
            return false;
        }
    }

    /**
     * A connection arrived: false (refused, counted, logged) when the handshake table is full of
     * handshakes that are still making progress.
     */
    boolean open(InboundConnection c, InetAddress address) {
        List<InboundConnection> fromAddress = handshaking.computeIfAbsent(address, a -> new ArrayList<>());
        if (fromAddress.size() >= MAX_HANDSHAKES_PER_ADDRESS) {
            makeRoom(fromAddress);
        } else if (handshakes >= MAX_HANDSHAKES) {
            handshaking.values().stream().max(Comparator.comparingInt(List::size)).ifPresent(this::makeRoom);
        }
        if (fromAddress.size() >= MAX_HANDSHAKES_PER_ADDRESS || handshakes >= MAX_HANDSHAKES) {
            if (fromAddress.isEmpty()) {
                handshaking.remove(address);
            }
            refuse(address, null, "handshakes", "too many connections in their handshake (" + handshakes
                + " in all, " + fromAddress.size() + " from this address), each still within its first "
                + STALLED_HANDSHAKE_MS + " ms");
            return false;
        }
        fromAddress.add(c);
        handshakes++;
        return true;
    }

    // Makes room in `list`: closes the handshake that came first among those that stalled (nothing useful
    // for STALLED_HANDSHAKE_MS), else among those that have not even named themselves yet. An honest client
    // names itself within a round trip of connecting, so a slowloris yields to it, never the reverse.
    private void makeRoom(List<InboundConnection> list) {
        long now = System.nanoTime();
        InboundConnection victim = list.stream()
            .filter(c -> now - c.lastHandshakeProgressNs() > STALLED_HANDSHAKE_MS * 1_000_000L).findFirst()
            .orElseGet(() -> list.stream().filter(c -> !c.namedItself()).findFirst().orElse(null));
        if (victim != null) {
            handshakeEnded(victim);
            victim.evict("it yielded its handshake slot to a new connection: it had sent nothing useful");
        }
    }

    /**
     * The handshake passed: false when the sender has its connections open already and none of them has
     * been idle for {@value #IDLE_BEFORE_EVICTION_MS} ms (the idlest one is closed to make room otherwise).
     */
    boolean authenticated(InboundConnection c, String sender) {
        handshakeEnded(c);
        List<InboundConnection> connections = bySender.computeIfAbsent(sender, s -> new ArrayList<>());
        if (connections.size() >= MAX_CONNECTIONS_PER_SENDER) {
            long now = System.nanoTime();
            InboundConnection idlest = connections.stream()
                .filter(x -> x.isIdle() && now - x.lastActivityNs() > IDLE_BEFORE_EVICTION_MS * 1_000_000L)
                .min(Comparator.comparingLong(InboundConnection::lastActivityNs)).orElse(null);
            if (idlest == null) {
                return false;
            }
            connections.remove(idlest);
            open.decrementAndGet();
            idlest.evict("a new connection of the same entity took its place (at most " + MAX_CONNECTIONS_PER_SENDER
                + " per entity; this one was the idlest)");
        }
        connections.add(c);
        open.incrementAndGet();
        return true;
    }

    private void handshakeEnded(InboundConnection c) {
        for (var it = handshaking.entrySet().iterator(); it.hasNext(); ) {
            List<InboundConnection> list = it.next().getValue();
            if (list.remove(c)) {
                handshakes--;
                if (list.isEmpty()) {
                    it.remove();
                }
                return;
            }
        }
    }

    /** The connection closed: it leaves whichever table still holds it (an evicted one has left already). */
    void closed(InboundConnection c, String sender) {
        handshakeEnded(c);
        List<InboundConnection> connections = sender == null ? null : bySender.get(sender);
        if (connections != null && connections.remove(c)) {
            open.decrementAndGet();
            if (connections.isEmpty()) {
                bySender.remove(sender);
            }
        }
    }

    /**
     * A peer broke the protocol or failed its handshake ({@code address} null: the other end of a connection
     * this process opened): counted, and logged once a minute per cause and peer.
     */
    void refuse(InetAddress address, String peer, String cause, String why) {
        if (address != null) {
            counters.rejectedConnections.incrementAndGet();
        }
        warnings.warn(cause, address + "/" + peer, "cross-node connection " + (address == null ? "to entity=" + peer
            : "from " + address.getHostAddress()) + (address == null || peer == null ? "" : " (entity=" + peer + ")")
            + " closed: " + why + " (counted in remoteRejectedConnections)");
    }
}
