package io.mstar.transport;

import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.naming.ShmNames;

import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The knobs of the cross-node path (Aeron UDP between the arenas of two nodes), part of
 * {@link TransportConfig}. Every process of a deployment may carry the same {@value #ENTITIES} map; each
 * node's processes set {@value #LISTEN} to that node's endpoint. An entity is reached over the network when
 * the map places it at another endpoint than this process's {@value #LISTEN}; every other entity (on this
 * node, or not in the map) through shared memory, as before.
 *
 * @param listen   {@value #LISTEN}: {@code host:port} this process receives tensors and confirmations on,
 *                 or null when it takes no part in the cross-node path
 * @param entities {@value #ENTITIES}: where each entity that other nodes send to listens, entity to
 *                 {@code host:port}
 * @param timeout  {@value #TIMEOUT_S}: how long a send waits for a remote entity that takes no data before
 *                 it fails, and how long a tensor sent to another node waits for its confirmation before its
 *                 slot is freed without it
 * @param aeronDir {@value #AERON_DIR}: the directory of a standalone Aeron media driver to use, or null to run
 *                 one embedded in this process
 * @param mtu      {@value #MTU}: the largest UDP datagram Aeron sends, bytes
 */
public record RemoteConfig(String listen, Map<String, String> entities, Duration timeout, Path aeronDir, int mtu) {
    public static final String LISTEN = "MSTAR_REMOTE_LISTEN";
    public static final String ENTITIES = "MSTAR_REMOTE_ENTITIES";
    public static final String TIMEOUT_S = "MSTAR_REMOTE_TIMEOUT_S";
    public static final Duration TIMEOUT_DEFAULT = Duration.ofSeconds(10);
    public static final String AERON_DIR = "MSTAR_REMOTE_AERON_DIR";
    public static final String MTU = "MSTAR_REMOTE_MTU";
    /** Aeron's own default: fits a 1500-byte Ethernet frame with its headers. */
    public static final int MTU_DEFAULT = 1408;
    /** Aeron's bounds: a multiple of 32 from 64 to 65504 (the largest UDP payload, aligned). */
    public static final int MTU_MIN = 64;
    public static final int MTU_MAX = 65504;

    public RemoteConfig {
        entities = Map.copyOf(entities);
    }

    /**
     * Parses {@value #ENTITIES}' value: {@code entity=host:port} pairs separated by commas.
     *
     * @throws ConfigurationException naming the entry that does not parse, or an entity named twice
     */
    static Map<String, String> parseEntities(String map) {
        Map<String, String> entities = new LinkedHashMap<>();
        String accepted = "entity=host:port pairs separated by commas, e.g. decode-0=10.0.0.2:40123";
        for (String entry : map.split(",")) {
            String item = entry.trim();
            int eq = item.indexOf('=');
            if (eq <= 0 || !ShmNames.isEntity(item.substring(0, eq).trim())) {
                throw invalid(ENTITIES, map, accepted + " (bad entry: '" + item + "')");
            }
            String endpoint = item.substring(eq + 1).trim();
            checkEndpoint(ENTITIES, map, endpoint);
            if (entities.put(item.substring(0, eq).trim(), endpoint) != null) {
                throw invalid(ENTITIES, map, accepted + ", each entity once");
            }
        }
        return entities;
    }

    /** Whether this process takes part in the cross-node path (it listens, or some entity is elsewhere). */
    public boolean enabled() {
        return listen != null || entities.values().stream().anyMatch(e -> !e.equals(listen));
    }

    /** Whether {@code entity} runs on another node: the map places it at another endpoint than ours. */
    public boolean isRemote(String entity) {
        String endpoint = entities.get(entity);
        return endpoint != null && !endpoint.equals(listen);
    }

    /** The endpoint {@code entity} listens on, or null when the map does not name it. */
    public String endpointOf(String entity) {
        return entities.get(entity);
    }

    Map<String, String> describe() {
        Map<String, String> values = new LinkedHashMap<>();
        values.put(LISTEN, listen == null ? "unset" : listen);
        values.put(ENTITIES, entities.isEmpty() ? "unset" : entities.toString());
        values.put(TIMEOUT_S, Double.toString(timeout.toNanos() / 1e9));
        values.put(AERON_DIR, aeronDir == null ? "embedded" : aeronDir.toString());
        values.put(MTU, Integer.toString(mtu));
        return values;
    }

    /** Checks a {@code host:port} found in variable {@code name}'s {@code value}. */
    static void checkEndpoint(String name, String value, String endpoint) {
        int colon = endpoint.lastIndexOf(':');
        int port = -1;
        if (colon > 0) {
            try {
                port = Integer.parseInt(endpoint.substring(colon + 1));
            } catch (NumberFormatException e) {
                port = -1;
            }
        }
        if (port < 1 || port > 65535 || endpoint.substring(0, colon).isBlank()) {
            throw invalid(name, value, "host:port with a port from 1 to 65535 (bad endpoint: '" + endpoint + "')");
        }
    }

    private static ConfigurationException invalid(String name, String value, String accepted) {
        return new ConfigurationException("invalid environment value: " + name + "=" + value + ", accepted: "
            + accepted);
    }
}
