package io.mstar.transport;

import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.posix.Posix;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;

/**
 * Every environment knob of the library, shared with the M* Python arena (same names, meanings and
 * defaults), validated once.
 *
 * <p>Values are read through an injectable lookup ({@link #fromEnvironment()} uses {@code System::getenv});
 * an unset or empty variable takes its default. An invalid value fails with a
 * {@link ConfigurationException} naming the variable, the value and what is accepted; nothing falls
 * back silently.
 *
 * <p>Each knob is a pair of constants: the variable's name, whose suffix gives the unit
 * ({@code _MB}, {@code _S}), and its {@code _DEFAULT}.
 *
 * @param mode              {@value #ARENA}: which transport the factory builds
 * @param segmentMb         {@value #SEGMENT_MB}: size of each arena segment, MiB
 * @param maxSegments       {@value #MAX_SEGMENTS}: growth cap per entity, in segments
 * @param fullTimeout       {@value #FULL_TIMEOUT_S}: strict mode, how long a send waits on a full arena
 * @param spill             {@value #SPILL}: at the cap, spill to a per-tensor file instead of failing
 * @param spillAfter        {@value #SPILL_AFTER_S}: grace before spilling, waiting for ACKs
 * @param pin               {@value #PIN}: register mapped segments with CUDA when it is present
 * @param pinMaxMb          {@value #PIN_MAX_MB}: pinned host memory budget per process, MiB
 * @param slotTtl           {@value #SLOT_TTL_S}: reclaim slots older than this without an ACK; zero is off
 * @param statsInterval     {@value #STATS_INTERVAL_S}: period of the stats log line when stats logging is on
 * @param publishStats      {@value #STATS_PUBLISH}: each arena publishes its stats snapshot for {@code mstar-shm stats}
 * @param reclaimInterval   {@value #RECLAIM_INTERVAL_S}: how often this process sweeps dead owners' files; zero is off
 * @param nodeMaxMb         {@value #NODE_MAX_MB}: the shared-memory budget of every arena of the deployment in
 *                          its directory together, MiB; 0 is none
 * @param stallWarn         {@value #STALL_WARN_S}: warn once when a tensor waits this long for its ACK while its
 *                          consumer lives; zero is off
 * @param shmDir            {@value #SHM_DIR}: where segments, spill files and mailboxes live
 * @param deploymentToken   {@value #DEPLOYMENT_TOKEN}: per-launch token mixed into the namespace, or null
 * @param cudartPath        {@value #CUDART}: the CUDA runtime library to load, or null to search for it
 * @param remote            the cross-node path's knobs ({@code MSTAR_REMOTE_*}), see {@link RemoteConfig}
 */
public record TransportConfig(
    Mode mode,
    int segmentMb,
    int maxSegments,
    Duration fullTimeout,
    boolean spill,
    Duration spillAfter,
    boolean pin,
    long pinMaxMb,
    Duration slotTtl,
    Duration statsInterval,
    boolean publishStats,
    Duration reclaimInterval,
    long nodeMaxMb,
    Duration stallWarn,
    Path shmDir,
    String deploymentToken,
    String cudartPath,
    RemoteConfig remote) {

    /** Which transport the factory builds: {@code 0} file, {@code 1} arena, {@code AUTO}. */
    public static final String ARENA = "MSTAR_SHM_ARENA";
    public static final Mode ARENA_DEFAULT = Mode.FILE;
    /** Size of each arena segment, MiB. */
    public static final String SEGMENT_MB = "MSTAR_SHM_ARENA_SEGMENT_MB";
    public static final int SEGMENT_MB_DEFAULT = 256;
    /** Growth cap per entity, in segments. */
    public static final String MAX_SEGMENTS = "MSTAR_SHM_ARENA_MAX_SEGMENTS";
    public static final int MAX_SEGMENTS_DEFAULT = 32;
    /** Strict mode: how long a send waits on a full arena, seconds. */
    public static final String FULL_TIMEOUT_S = "MSTAR_SHM_ARENA_FULL_TIMEOUT_S";
    public static final Duration FULL_TIMEOUT_DEFAULT = Duration.ofSeconds(30);
    /** At the cap, spill to a file per tensor ({@code 1}) or fail after the timeout ({@code 0}). */
    public static final String SPILL = "MSTAR_SHM_ARENA_SPILL";
    public static final boolean SPILL_DEFAULT = true;
    /** Grace before spilling, waiting for ACKs, seconds. */
    public static final String SPILL_AFTER_S = "MSTAR_SHM_ARENA_SPILL_AFTER_S";
    public static final Duration SPILL_AFTER_DEFAULT = Duration.ZERO;
    /** Register mapped segments with CUDA when it is present ({@code 1}). */
    public static final String PIN = "MSTAR_SHM_ARENA_PIN";
    public static final boolean PIN_DEFAULT = true;
    /** Pinned host memory budget per process, MiB. */
    public static final String PIN_MAX_MB = "MSTAR_SHM_ARENA_PIN_MAX_MB";
    public static final long PIN_MAX_MB_DEFAULT = 4096;
    /** Reclaim a slot or spill file that got no ACK for this long, seconds; {@code 0} is off. */
    public static final String SLOT_TTL_S = "MSTAR_SHM_ARENA_SLOT_TTL_S";
    public static final Duration SLOT_TTL_DEFAULT = Duration.ZERO;
    /** Period of the stats log line when stats logging is on, seconds. */
    public static final String STATS_INTERVAL_S = "MSTAR_SHM_ARENA_STATS_INTERVAL_S";
    public static final Duration STATS_INTERVAL_DEFAULT = Duration.ofSeconds(60);
    /**
     * This library's own knob (M* has none): every arena, an endpoint's included, writes its stats snapshot to
     * a file of its own every second, for {@code mstar-shm stats} in another process ({@code 0} off).
     */
    public static final String STATS_PUBLISH = "MSTAR_SHM_STATS_PUBLISH";
    public static final boolean STATS_PUBLISH_DEFAULT = true;
    /** This library's own knob (M* has none): seconds between sweeps of dead owners' files, {@code 0} off. */
    public static final String RECLAIM_INTERVAL_S = "MSTAR_SHM_RECLAIM_INTERVAL_S";
    public static final Duration RECLAIM_INTERVAL_DEFAULT = Duration.ofSeconds(30);
    /**
     * This library's own knob (M* has none): the most shared memory every arena of the deployment in its
     * directory commits together, MiB ({@code 0}: none; each arena still has its own ceiling). Arenas account in
     * a small file of the directory ({@code lifecycle.NodeBudget}); one that would pass it waits for its slots,
     * then spills, as at its own ceiling.
     */
    public static final String NODE_MAX_MB = "MSTAR_SHM_NODE_MAX_MB";
    public static final long NODE_MAX_MB_DEFAULT = 0;
    /**
     * This library's own knob (M* has none): a tensor that waits this long for its ACK while its consumer lives
     * is a stall (an ACK nobody reads, a consumer that stopped handling): one WARN names it, seconds, {@code 0}
     * off.
     */
    public static final String STALL_WARN_S = "MSTAR_SHM_STALL_WARN_S";
    public static final Duration STALL_WARN_DEFAULT = Duration.ofSeconds(10);
    /**
     * Where segments, spill files and mailboxes live: an absolute directory. Unset: a directory of this
     * user's own, {@code /dev/shm/mstar-<uid>} (see {@link #defaultShmDir()}).
     */
    public static final String SHM_DIR = "MSTAR_SHM_DIR";
    /** A per-launch token mixed into the namespace; unset by default. */
    public static final String DEPLOYMENT_TOKEN = "MSTAR_DEPLOYMENT_TOKEN";
    /** The CUDA runtime library to load; unset: searched for. */
    public static final String CUDART = "MSTAR_CUDART";

    /** Largest accepted segment: the allocator indexes 256-byte granules with {@code int}s. */
    public static final int MAX_SEGMENT_MB = 65536;
    /** Largest accepted growth cap; slot handles keep 12 bits for the segment position. */
    public static final int MAX_MAX_SEGMENTS = 4096;
    private static final double MAX_SECONDS = 7 * 24 * 3600;

    /** Which transport the factory builds. */
    public enum Mode {
        /** {@code 0}: the file-per-tensor transport. */
        FILE,
        /** {@code 1}: the arena; an error when it cannot start. */
        ARENA,
        /** {@code AUTO}: the arena when it can start, else the file transport with one warning. */
        AUTO
    }

    public TransportConfig {
        Objects.requireNonNull(mode, "mode");
        Objects.requireNonNull(fullTimeout, "fullTimeout");
        Objects.requireNonNull(spillAfter, "spillAfter");
        Objects.requireNonNull(slotTtl, "slotTtl");
        Objects.requireNonNull(statsInterval, "statsInterval");
        Objects.requireNonNull(reclaimInterval, "reclaimInterval");
        Objects.requireNonNull(stallWarn, "stallWarn");
        Objects.requireNonNull(shmDir, "shmDir");
        Objects.requireNonNull(remote, "remote");
    }

    /** The configuration from this process's environment. */
    public static TransportConfig fromEnvironment() {
        return from(System::getenv);
    }

    /** The configuration from {@code lookup} (variable name to value, null when unset). */
    public static TransportConfig from(Function<String, String> lookup) {
        Reader r = new Reader(lookup);
        return new TransportConfig(
            r.mode(),
            (int) r.integer(SEGMENT_MB, SEGMENT_MB_DEFAULT, 1, MAX_SEGMENT_MB),
            (int) r.integer(MAX_SEGMENTS, MAX_SEGMENTS_DEFAULT, 1, MAX_MAX_SEGMENTS),
            r.seconds(FULL_TIMEOUT_S, FULL_TIMEOUT_DEFAULT, true),
            r.flag(SPILL, SPILL_DEFAULT),
            r.seconds(SPILL_AFTER_S, SPILL_AFTER_DEFAULT, true),
            r.flag(PIN, PIN_DEFAULT),
            r.integer(PIN_MAX_MB, PIN_MAX_MB_DEFAULT, 0, 1L << 30),
            r.seconds(SLOT_TTL_S, SLOT_TTL_DEFAULT, true),
            r.seconds(STATS_INTERVAL_S, STATS_INTERVAL_DEFAULT, false),
            r.flag(STATS_PUBLISH, STATS_PUBLISH_DEFAULT),
            r.seconds(RECLAIM_INTERVAL_S, RECLAIM_INTERVAL_DEFAULT, true),
            r.integer(NODE_MAX_MB, NODE_MAX_MB_DEFAULT, 0, 1L << 30),
            r.seconds(STALL_WARN_S, STALL_WARN_DEFAULT, true),
            r.directory(SHM_DIR, defaultShmDir()),
            r.text(DEPLOYMENT_TOKEN),
            r.text(CUDART),
            r.remote());
    }

    /**
     * The shared-memory directory when {@value #SHM_DIR} is unset: {@code /dev/shm/mstar-<uid>} for this
     * process's effective uid, created mode 0700 and checked (ours, not a link, on a tmpfs) on first use.
     */
    public static Path defaultShmDir() {
        return Path.of("/dev/shm", "mstar-" + Posix.geteuid());
    }

    /** Bytes of one segment. */
    public long segmentBytes() {
        return (long) segmentMb << 20;
    }

    /** Bytes one entity's arena may reach: {@code MAX_SEGMENTS x SEGMENT_MB}. */
    public long ceilingBytes() {
        return maxSegments * segmentBytes();
    }

    /** The effective values, by variable name, for the one start-up log line. */
    public Map<String, String> describe() {
        Map<String, String> values = new LinkedHashMap<>();
        values.put(ARENA, switch (mode) {
            case FILE -> "0";
            case ARENA -> "1";
            case AUTO -> "AUTO";
        });
        values.put(SEGMENT_MB, Integer.toString(segmentMb));
        values.put(MAX_SEGMENTS, Integer.toString(maxSegments));
        values.put(FULL_TIMEOUT_S, seconds(fullTimeout));
        values.put(SPILL, spill ? "1" : "0");
        values.put(SPILL_AFTER_S, seconds(spillAfter));
        values.put(PIN, pin ? "1" : "0");
        values.put(PIN_MAX_MB, Long.toString(pinMaxMb));
        values.put(SLOT_TTL_S, seconds(slotTtl));
        values.put(STATS_INTERVAL_S, seconds(statsInterval));
        values.put(STATS_PUBLISH, publishStats ? "1" : "0");
        values.put(RECLAIM_INTERVAL_S, seconds(reclaimInterval));
        values.put(NODE_MAX_MB, Long.toString(nodeMaxMb));
        values.put(STALL_WARN_S, seconds(stallWarn));
        values.put(SHM_DIR, shmDir.toString());
        values.put(DEPLOYMENT_TOKEN, deploymentToken == null ? "unset" : "set");
        values.put(CUDART, cudartPath == null ? "search" : cudartPath);
        values.putAll(remote.describe());
        return values;
    }

    private static String seconds(Duration d) {
        return d.toNanos() % 1_000_000_000L == 0 ? Long.toString(d.toSeconds()) : Double.toString(d.toNanos() / 1e9);
    }

    /** Parses one variable at a time, naming it in every error. */
    private record Reader(Function<String, String> lookup) {
        private String raw(String name) {
            String value = lookup.apply(name);
            return value == null || value.isBlank() ? null : value.trim();
        }

        private static ConfigurationException invalid(String name, String value, String accepted) {
            return new ConfigurationException("invalid environment value: " + name + "=" + value
                + ", accepted: " + accepted);
        }

        Mode mode() {
            String value = raw(ARENA);
            if (value == null) {
                return ARENA_DEFAULT;
            }
            return switch (value.toUpperCase(Locale.ROOT)) {
                case "0" -> Mode.FILE;
                case "1" -> Mode.ARENA;
                case "AUTO" -> Mode.AUTO;
                default -> throw invalid(ARENA, value, "0 (file transport), 1 (arena, error if it cannot start)"
                    + " or AUTO (arena when it can start)");
            };
        }

        long integer(String name, long defaultValue, long min, long max) {
            String value = raw(name);
            if (value == null) {
                return defaultValue;
            }
            String accepted = "an integer from " + min + " to " + max;
            long parsed;
            try {
                parsed = Long.parseLong(value);
            } catch (NumberFormatException e) {
                throw invalid(name, value, accepted);
            }
            if (parsed < min || parsed > max) {
                throw invalid(name, value, accepted);
            }
            return parsed;
        }

        Duration seconds(String name, Duration defaultValue, boolean zeroAllowed) {
            String value = raw(name);
            if (value == null) {
                return defaultValue;
            }
            String accepted = "seconds, a number " + (zeroAllowed ? "from 0" : "above 0") + " up to " + (long) MAX_SECONDS;
            double parsed;
            try {
                parsed = Double.parseDouble(value);
            } catch (NumberFormatException e) {
                throw invalid(name, value, accepted);
            }
            if (!(parsed >= 0 && parsed <= MAX_SECONDS) || (!zeroAllowed && parsed == 0)) {
                throw invalid(name, value, accepted);
            }
            return Duration.ofNanos(Math.round(parsed * 1e9));
        }

        boolean flag(String name, boolean defaultValue) {
            String value = raw(name);
            if (value == null) {
                return defaultValue;
            }
            return switch (value.toLowerCase(Locale.ROOT)) {
                case "1", "true" -> true;
                case "0", "false" -> false;
                default -> throw invalid(name, value, "0 or 1 (also false or true)");
            };
        }

        Path directory(String name, Path defaultValue) {
            String value = raw(name);
            if (value == null) {
                return defaultValue;
            }
            Path path;
            try {
                path = Path.of(value);
            } catch (RuntimeException e) {
                throw invalid(name, value, "an absolute directory path");
            }
            if (!path.isAbsolute()) {
                throw invalid(name, value, "an absolute directory path");
            }
            return path.normalize();
        }

        String text(String name) {
            return raw(name);
        }

        RemoteConfig remote() {
            String listen = raw(RemoteConfig.LISTEN);
            if (listen != null) {
                RemoteConfig.checkEndpoint(RemoteConfig.LISTEN, listen, listen);
            }
            String entities = raw(RemoteConfig.ENTITIES);
            byte[] secret = null;
            String source = null;
            String file = raw(RemoteConfig.SECRET_FILE);
            if (file != null) {
                secret = secretFile(file);
                source = RemoteConfig.SECRET_FILE + "=" + file;
            } else if (raw(RemoteConfig.SECRET) != null) {
                secret = raw(RemoteConfig.SECRET).getBytes(StandardCharsets.UTF_8);
                source = RemoteConfig.SECRET;
                if (secret.length < RemoteConfig.MIN_SECRET_BYTES) {
                    throw invalid(RemoteConfig.SECRET, "(" + secret.length + " bytes, not shown)", "a secret of at least "
                        + RemoteConfig.MIN_SECRET_BYTES + " bytes, e.g. from openssl rand -base64 32");
                }
            } else if (raw(DEPLOYMENT_TOKEN) != null) {
                String token = raw(DEPLOYMENT_TOKEN);
                double bits = RemoteConfig.entropyBits(token);
                if (bits >= RemoteConfig.MIN_TOKEN_BITS) {
                    secret = token.getBytes(StandardCharsets.UTF_8);
                    source = DEPLOYMENT_TOKEN;
                } else { // the remote path refuses to start with this source named; a local deployment is unaffected
                    source = DEPLOYMENT_TOKEN + " (not used as the secret: about " + (int) bits + " bits by its length"
                        + " and alphabet, " + RemoteConfig.MIN_TOKEN_BITS + " needed)";
                }
            }
            Path keystore = file(RemoteConfig.TLS_KEYSTORE);
            Path truststore = file(RemoteConfig.TLS_TRUSTSTORE);
            String password = raw(RemoteConfig.TLS_PASSWORD);
            if (keystore != null && (truststore == null || password == null)) {
                throw invalid(RemoteConfig.TLS_KEYSTORE, keystore.toString(), "set together with "
                    + RemoteConfig.TLS_TRUSTSTORE + " (the certificates peers must present) and "
                    + RemoteConfig.TLS_PASSWORD);
            }
            return new RemoteConfig(listen, entities == null ? Map.of() : RemoteConfig.parseEntities(entities),
                seconds(RemoteConfig.TIMEOUT_S, RemoteConfig.TIMEOUT_DEFAULT, false), secret, source,
                flag(RemoteConfig.INSECURE, false), keystore, truststore, password,
                integer(RemoteConfig.MAX_INFLIGHT_MB, RemoteConfig.MAX_INFLIGHT_MB_DEFAULT, 1, 1L << 20) << 20,
                (int) integer(RemoteConfig.MAX_INFLIGHT_TENSORS, RemoteConfig.MAX_INFLIGHT_TENSORS_DEFAULT, 1, 1 << 20),
                seconds(RemoteConfig.IDLE_TIMEOUT_S, RemoteConfig.IDLE_TIMEOUT_DEFAULT, false));
        }

        // The secret in a file of its own: readable by its owner alone, as ssh wants of a private key.
        private byte[] secretFile(String value) {
            Path path = file(RemoteConfig.SECRET_FILE);
            try {
                Set<PosixFilePermission> perms = Files.getPosixFilePermissions(path);
                if (perms.stream().anyMatch(p -> p.name().startsWith("GROUP") || p.name().startsWith("OTHERS"))) {
                    throw invalid(RemoteConfig.SECRET_FILE, value, "a file only its owner may read or write (chmod 600 "
                        + value + "); it is " + PosixFilePermissions.toString(perms));
                }
                byte[] secret = Files.readString(path, StandardCharsets.UTF_8).strip().getBytes(StandardCharsets.UTF_8);
                if (secret.length < RemoteConfig.MIN_SECRET_BYTES) {
                    throw invalid(RemoteConfig.SECRET_FILE, value, "a file holding a secret of at least "
                        + RemoteConfig.MIN_SECRET_BYTES + " bytes");
                }
                return secret;
            } catch (IOException | UnsupportedOperationException e) {
                throw invalid(RemoteConfig.SECRET_FILE, value, "a readable file holding the secret (" + e + ")");
            }
        }

        private Path file(String name) {
            String value = raw(name);
            if (value == null) {
                return null;
            }
            Path path;
            try {
                path = Path.of(value);
            } catch (RuntimeException e) {
                throw invalid(name, value, "an absolute path of an existing file");
            }
            if (!path.isAbsolute() || !Files.isRegularFile(path)) {
                throw invalid(name, value, "an absolute path of an existing file");
            }
            return path;
        }
    }
}
