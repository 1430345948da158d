package io.mstar.transport.remote;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Who may hold a connection to this process, on the event loop: only an entity the map places at the
 * connecting address; at most {@value #MAX_HANDSHAKES} connections in their handshake ({@value
 * #MAX_HANDSHAKES_PER_ADDRESS} from one address) and {@value #MAX_CONNECTIONS_PER_SENDER} authenticated ones
 * per entity. Every refusal is counted and logged at most once a minute per peer, so a flood cannot flood the
 * log.
 */
final class ConnectionGate {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    static final int MAX_HANDSHAKES = 64;
    static final int MAX_HANDSHAKES_PER_ADDRESS = 16;
    static final int MAX_CONNECTIONS_PER_SENDER = 4;
    private static final long LOG_INTERVAL_NS = 60_000_000_000L;

    private final Map<String, Set<InetAddress>> placements; // entity to the addresses its host resolves to
    private final RemoteCounters counters;
    private int handshakes;
    private final Map<InetAddress, Integer> handshakesByAddress = new HashMap<>();
    private final Map<String, Integer> connectionsBySender = new HashMap<>();
    private final Map<String, Long> lastLog = new HashMap<>();
    private final AtomicInteger open = new AtomicInteger();

    ConnectionGate(Map<String, Set<InetAddress>> placements, RemoteCounters counters) {
        this.placements = Map.copyOf(placements);
        this.counters = counters;
    }

    int openConnections() {
        return open.get();
    }

    /** Whether {@code name} is an entity of the map placed at {@code address}. */
    boolean placedAt(String name, InetAddress address) {
        Set<InetAddress> at = placements.get(name);
        return at != null && (at.contains(address)
            || at.stream().anyMatch(InetAddress::isAnyLocalAddress) && isLocal(address));
    }

    private static boolean isLocal(InetAddress address) {
        try {
            return address.isLoopbackAddress() || NetworkInterface.getByInetAddress(address) != null;
        } catch (SocketException e) {
            return false;
        }
    }

    /** A connection arrived: false (refused, counted, logged) when too many are still in their handshake. */
    boolean open(InetAddress address) {
        int fromAddress = handshakesByAddress.getOrDefault(address, 0);
        if (handshakes >= MAX_HANDSHAKES || fromAddress >= MAX_HANDSHAKES_PER_ADDRESS) {
            refuse(address, null, "too many connections in their handshake (" + handshakes + " in all, "
                + fromAddress + " from this address)");
            return false;
        }
        handshakes++;
        handshakesByAddress.put(address, fromAddress + 1);
        return true;
    }

    /** The handshake passed: false when the sender has too many connections open already. */
    boolean authenticated(InetAddress address, String sender) {
        handshakeEnded(address);
        int connections = connectionsBySender.getOrDefault(sender, 0);
        if (connections >= MAX_CONNECTIONS_PER_SENDER) {
            return false;
        }
        connectionsBySender.put(sender, connections + 1);
        open.incrementAndGet();
        return true;
    }

    private void handshakeEnded(InetAddress address) {
        handshakes--;
        handshakesByAddress.computeIfPresent(address, (a, n) -> n <= 1 ? null : n - 1);
    }

    void closed(InetAddress address, String sender, boolean inHandshake, boolean authenticated) {
        if (inHandshake) {
            handshakeEnded(address);
        }
        if (authenticated) {
            connectionsBySender.computeIfPresent(sender, (s, n) -> n <= 1 ? null : n - 1);
            open.decrementAndGet();
        }
    }

    /**
     * A peer broke the protocol or failed its handshake ({@code address} null: the other end of a connection
     * this process opened): counted, and logged once a minute per peer.
     */
    void refuse(InetAddress address, String peer, String why) {
        if (address != null) {
            counters.rejectedConnections.incrementAndGet();
        }
        String key = address + "/" + peer;
        long now = System.nanoTime();
        Long last = lastLog.get(key);
        if (last == null || now - last > LOG_INTERVAL_NS) {
            if (lastLog.size() > 4096) {
                lastLog.clear();
            }
            lastLog.put(key, now);
            LOG.warn("cross-node connection {}{} closed: {} (counted in remoteRejectedConnections; logged once a"
                + " minute per peer)", address == null ? "to entity=" + peer : "from " + address.getHostAddress(),
                address == null || peer == null ? "" : " (entity=" + peer + ")", why);
        }
    }
}
