package io.mstar.transport.remote;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Where the map ({@code MSTAR_REMOTE_ENTITIES}) places each entity: its host name, resolved again whenever a
 * connection comes from an address the last resolution did not give (at most once a second per entity), so a
 * node restarted at a new address under the same name (a Kubernetes pod behind a headless Service) is accepted
 * with no map changed. A name that does not resolve yet (a pod not started) places its entity nowhere until it
 * does. The JVM's own cache of names ({@code networkaddress.cache.ttl}, 30 s by default) comes first: see
 * {@code docs/remote.md}. Used on the event loop.
 */
final class Placements {
    private static final Logger LOG = LoggerFactory.getLogger(Placements.class);
    static final long RESOLVE_INTERVAL_NS = 1_000_000_000L;

    private final Map<String, String> hosts; // entity to the host its endpoint names
    private final Map<String, Set<InetAddress>> resolved = new HashMap<>();
    private final Map<String, Long> resolvedAt = new HashMap<>();

    Placements(Map<String, String> hosts) {
        this.hosts = Map.copyOf(hosts);
        hosts.keySet().forEach(entity -> resolve(entity, System.nanoTime()));
    }

    /** The addresses {@code entity}'s host resolves to now (as last resolved); empty when it does not resolve. */
    synchronized Set<InetAddress> of(String entity) {
        return resolved.getOrDefault(entity, Set.of());
    }

    /** Whether {@code address} is where {@code entity} is now: resolved again if it was not, at most once a second. */
    synchronized boolean contains(String entity, InetAddress address) {
        if (!hosts.containsKey(entity)) {
            return false;
        }
        if (of(entity).contains(address)) {
            return true;
        }
        long now = System.nanoTime();
        if (now - resolvedAt.getOrDefault(entity, now - RESOLVE_INTERVAL_NS) >= RESOLVE_INTERVAL_NS) {
            resolve(entity, now);
        }
        return of(entity).contains(address);
    }

    private void resolve(String entity, long now) {
        resolvedAt.put(entity, now);
        try {
            Set<InetAddress> addresses = Set.copyOf(List.of(InetAddress.getAllByName(hosts.get(entity))));
            Set<InetAddress> before = resolved.put(entity, addresses);
            if (before != null && !before.equals(addresses)) {
                LOG.info("entity={} is now at {} (its name {} resolved to {} before)", entity, addresses,
                    hosts.get(entity), before);
            }
        } catch (UnknownHostException e) {
            resolved.put(entity, Set.of());
            LOG.debug("entity={}: its host {} does not resolve (yet): {}", entity, hosts.get(entity), e.getMessage());
        }
    }
}
