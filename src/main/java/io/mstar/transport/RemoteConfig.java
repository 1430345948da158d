package io.mstar.transport;

import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.naming.ShmNames;

import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The knobs of the cross-node path (TCP between the arenas of two nodes, every connection authenticated),
 * part of {@link TransportConfig}. Every process of a deployment may carry the same {@value #ENTITIES} map;
 * each process that other nodes send to sets {@value #LISTEN} to its own entry. An entity is reached over the
 * network when the map places it at another endpoint than this process's {@value #LISTEN}; every other entity
 * (on this node, or not in the map) through shared memory, as before.
 *
 * @param listen         {@value #LISTEN}: {@code host:port} this process accepts connections on, or null when
 *                       no other node sends to it
 * @param entities       {@value #ENTITIES}: where each entity of the cross-node path listens, entity to
 *                       {@code host:port}; a connection is accepted only from an entity the map places at the
 *                       connecting address
 * @param timeout        {@value #TIMEOUT_S}: how long a send waits for a remote entity that takes no data before
 *                       it fails, how long a tensor sent to another node waits for its confirmation before its
 *                       slot is freed without it, and how long a received tensor's bytes may lag behind its header
 * @param secret         the deployment's secret that both ends of a connection prove they hold:
 *                       {@value #SECRET_FILE}, else {@value #SECRET}, else {@code MSTAR_DEPLOYMENT_TOKEN}; null
 *                       when none is set (the path then refuses to start unless {@value #INSECURE}=1)
 * @param secretSource   which knob the secret came from, for the start-up log (never the secret itself)
 * @param insecure       {@value #INSECURE}: run without a secret (any process that can reach the port may
 *                       connect as an entity of the map)
 * @param tlsKeystore    {@value #TLS_KEYSTORE}: a PKCS12 file with this node's key and certificate; TLS 1.3 with
 *                       mutual certificates when set
 * @param tlsTruststore  {@value #TLS_TRUSTSTORE}: a PKCS12 file with the certificates (or CA) peers must present
 * @param tlsPassword    {@value #TLS_PASSWORD}: the password of both PKCS12 files
 * @param maxInFlightBytes {@value #MAX_INFLIGHT_MB}: bytes one sending entity may hold in this node's arena
 *                       (landing or landed and not yet ACKed) before this node stops reading from it; a tensor
 *                       larger than this is refused before any of it is committed
 * @param maxInFlightTensors {@value #MAX_INFLIGHT_TENSORS}: tensors (each a slot or a spill file) one sending
 *                       entity may hold here at once, whatever their size
 * @param idleTimeout    {@value #IDLE_TIMEOUT_S}: an authenticated connection that carries nothing for this long
 *                       is closed (the sending side opens a new one when it next sends)
 */
public record RemoteConfig(String listen, Map<String, String> entities, Duration timeout, byte[] secret,
                           String secretSource, boolean insecure, Path tlsKeystore, Path tlsTruststore,
                           String tlsPassword, long maxInFlightBytes, int maxInFlightTensors,
                           Duration idleTimeout) {
    public static final String LISTEN = "MSTAR_REMOTE_LISTEN";
    public static final String ENTITIES = "MSTAR_REMOTE_ENTITIES";
    public static final String TIMEOUT_S = "MSTAR_REMOTE_TIMEOUT_S";
    public static final Duration TIMEOUT_DEFAULT = Duration.ofSeconds(10);
    public static final String SECRET = "MSTAR_REMOTE_SECRET";
    public static final String SECRET_FILE = "MSTAR_REMOTE_SECRET_FILE";
    public static final String INSECURE = "MSTAR_REMOTE_INSECURE";
    public static final String TLS_KEYSTORE = "MSTAR_REMOTE_TLS_KEYSTORE";
    public static final String TLS_TRUSTSTORE = "MSTAR_REMOTE_TLS_TRUSTSTORE";
    public static final String TLS_PASSWORD = "MSTAR_REMOTE_TLS_PASSWORD";
    public static final String MAX_INFLIGHT_MB = "MSTAR_REMOTE_MAX_INFLIGHT_MB";
    public static final long MAX_INFLIGHT_MB_DEFAULT = 256;
    public static final String MAX_INFLIGHT_TENSORS = "MSTAR_REMOTE_MAX_INFLIGHT_TENSORS";
    public static final int MAX_INFLIGHT_TENSORS_DEFAULT = 2048;
    public static final String IDLE_TIMEOUT_S = "MSTAR_REMOTE_IDLE_TIMEOUT_S";
    public static final Duration IDLE_TIMEOUT_DEFAULT = Duration.ofSeconds(300);
    /** The shortest secret accepted ({@value #SECRET}, {@value #SECRET_FILE}), bytes. */
    public static final int MIN_SECRET_BYTES = 16;
    /** A deployment token serves as the secret only with this much entropy by its length and alphabet, bits. */
    public static final int MIN_TOKEN_BITS = 128;

    public RemoteConfig {
        entities = Map.copyOf(entities);
        secret = secret == null ? null : secret.clone();
    }

    /** A copy of the secret, or null. */
    @Override
    public byte[] secret() {
        return secret == null ? null : secret.clone();
    }

    /** Whether connections run inside TLS ({@value #TLS_KEYSTORE} is set). */
    public boolean tls() {
        return tlsKeystore != null;
    }

    @Override
    public String toString() {
        return "RemoteConfig" + describe(); // never the secret or the password
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

    /**
     * What a random string of {@code token}'s length over its alphabet would hold, bits: the alphabet is
     * hexadecimal when every character is a hex digit of one case, else the union of the classes present
     * (digits, lower case, upper case, other printable ASCII, anything else). An upper bound for a token a
     * person chose, a fair figure for one a generator drew.
     */
    public static double entropyBits(String token) {
        boolean hex = token.chars().allMatch(c -> c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
            || token.chars().allMatch(c -> c >= '0' && c <= '9' || c >= 'A' && c <= 'F');
        int alphabet = 16;
        if (!hex) {
            alphabet = 0;
            alphabet += token.chars().anyMatch(c -> c >= '0' && c <= '9') ? 10 : 0;
            alphabet += token.chars().anyMatch(c -> c >= 'a' && c <= 'z') ? 26 : 0;
            alphabet += token.chars().anyMatch(c -> c >= 'A' && c <= 'Z') ? 26 : 0;
            alphabet += token.chars().anyMatch(c -> c > ' ' && c < 127 && !Character.isLetterOrDigit(c)) ? 33 : 0;
            alphabet += token.chars().anyMatch(c -> c >= 127) ? 128 : 0;
        }
        return token.length() * Math.log(Math.max(alphabet, 1)) / Math.log(2);
    }

    Map<String, String> describe() {
        Map<String, String> values = new LinkedHashMap<>();
        values.put(LISTEN, listen == null ? "unset" : listen);
        values.put(ENTITIES, entities.isEmpty() ? "unset" : entities.toString());
        values.put(TIMEOUT_S, Double.toString(timeout.toNanos() / 1e9));
        values.put("secret", secret == null ? (insecure ? "none (" + INSECURE + "=1)"
            : secretSource == null ? "unset" : "unset, " + secretSource) : secretSource);
        values.put(TLS_KEYSTORE, tlsKeystore == null ? "unset (no TLS)" : tlsKeystore.toString());
        values.put(TLS_TRUSTSTORE, tlsTruststore == null ? "unset" : tlsTruststore.toString());
        values.put(MAX_INFLIGHT_MB, Long.toString(maxInFlightBytes >> 20));
        values.put(MAX_INFLIGHT_TENSORS, Integer.toString(maxInFlightTensors));
        values.put(IDLE_TIMEOUT_S, Double.toString(idleTimeout.toNanos() / 1e9));
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
