package io.mstar.transport;

import io.mstar.transport.exceptions.ConfigurationException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TransportConfigTest {
    private static TransportConfig with(String name, String value) {
        return TransportConfig.from(Map.of(name, value)::get);
    }

    @Test
    void defaultsMatchTheSharedTable() {
        TransportConfig c = TransportConfig.from(name -> null);
        assertEquals(TransportConfig.Mode.FILE, c.mode());
        assertEquals(256, c.segmentMb());
        assertEquals(32, c.maxSegments());
        assertEquals(Duration.ofSeconds(30), c.fullTimeout());
        assertTrue(c.spill());
        assertEquals(Duration.ZERO, c.spillAfter());
        assertTrue(c.pin());
        assertEquals(4096, c.pinMaxMb());
        assertEquals(Duration.ZERO, c.slotTtl());
        assertEquals(Duration.ofSeconds(60), c.statsInterval());
        assertEquals(Path.of("/dev/shm/mstar-" + io.mstar.transport.posix.Posix.geteuid()), c.shmDir(),
            "a directory of this user's own under /dev/shm");
        assertEquals(Duration.ofSeconds(30), c.reclaimInterval());
        assertNull(c.deploymentToken());
        assertNull(c.cudartPath());
        assertEquals(256L << 20, c.segmentBytes());
        assertEquals(32 * (256L << 20), c.ceilingBytes());
        assertEquals("unset", c.describe().get(TransportConfig.DEPLOYMENT_TOKEN));
    }

    @Test
    void emptyValuesTakeTheDefault() {
        assertEquals(256, with(TransportConfig.SEGMENT_MB, "  ").segmentMb());
    }

    @ParameterizedTest
    @CsvSource({"0,FILE", "1,ARENA", "AUTO,AUTO", "auto,AUTO", " 1 ,ARENA"})
    void parsesModes(String value, TransportConfig.Mode expected) {
        assertEquals(expected, with(TransportConfig.ARENA, value).mode());
    }

    @Test
    void parsesEachVariable() {
        TransportConfig c = TransportConfig.from(Map.ofEntries(
            Map.entry(TransportConfig.SEGMENT_MB, "64"),
            Map.entry(TransportConfig.MAX_SEGMENTS, "8"),
            Map.entry(TransportConfig.FULL_TIMEOUT_S, "2.5"),
            Map.entry(TransportConfig.SPILL, "0"),
            Map.entry(TransportConfig.SPILL_AFTER_S, "0.25"),
            Map.entry(TransportConfig.PIN, "false"),
            Map.entry(TransportConfig.PIN_MAX_MB, "0"),
            Map.entry(TransportConfig.SLOT_TTL_S, "600"),
            Map.entry(TransportConfig.STATS_INTERVAL_S, "5"),
            Map.entry(TransportConfig.SHM_DIR, "/tmp/shm/../shm2"),
            Map.entry(TransportConfig.DEPLOYMENT_TOKEN, "secret"),
            Map.entry(TransportConfig.CUDART, "/opt/cuda/libcudart.so.13"))::get);
        assertEquals(64, c.segmentMb());
        assertEquals(8, c.maxSegments());
        assertEquals(Duration.ofMillis(2500), c.fullTimeout());
        assertFalse(c.spill());
        assertEquals(Duration.ofMillis(250), c.spillAfter());
        assertFalse(c.pin());
        assertEquals(0, c.pinMaxMb());
        assertEquals(Duration.ofMinutes(10), c.slotTtl());
        assertEquals(Duration.ofSeconds(5), c.statsInterval());
        assertEquals(Path.of("/tmp/shm2"), c.shmDir());
        assertEquals("secret", c.deploymentToken());
        assertEquals("/opt/cuda/libcudart.so.13", c.cudartPath());
        assertEquals("set", c.describe().get(TransportConfig.DEPLOYMENT_TOKEN));
        assertEquals("2.5", c.describe().get(TransportConfig.FULL_TIMEOUT_S));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "MSTAR_SHM_ARENA|yes|0 (file transport), 1 (arena",
        "MSTAR_SHM_ARENA_SEGMENT_MB|abc|an integer from 1 to 65536",
        "MSTAR_SHM_ARENA_SEGMENT_MB|0|an integer from 1 to 65536",
        "MSTAR_SHM_ARENA_SEGMENT_MB|1.5|an integer from 1 to 65536",
        "MSTAR_SHM_ARENA_SEGMENT_MB|65537|an integer from 1 to 65536",
        "MSTAR_SHM_ARENA_MAX_SEGMENTS|0|an integer from 1 to 4096",
        "MSTAR_SHM_ARENA_MAX_SEGMENTS|5000|an integer from 1 to 4096",
        "MSTAR_SHM_ARENA_FULL_TIMEOUT_S|-1|seconds, a number from 0",
        "MSTAR_SHM_ARENA_FULL_TIMEOUT_S|soon|seconds, a number from 0",
        "MSTAR_SHM_ARENA_FULL_TIMEOUT_S|NaN|seconds, a number from 0",
        "MSTAR_SHM_ARENA_SPILL|2|0 or 1",
        "MSTAR_SHM_ARENA_SPILL_AFTER_S|1e9|seconds, a number from 0",
        "MSTAR_SHM_ARENA_PIN|on|0 or 1",
        "MSTAR_SHM_ARENA_PIN_MAX_MB|-5|an integer from 0",
        "MSTAR_SHM_ARENA_SLOT_TTL_S|x|seconds, a number from 0",
        "MSTAR_SHM_ARENA_STATS_INTERVAL_S|0|seconds, a number above 0",
        "MSTAR_SHM_DIR|relative/dir|an absolute directory path",
    })
    void invalidValuesNameVariableValueAndWhatIsAccepted(String name, String value, String accepted) {
        ConfigurationException e = assertThrows(ConfigurationException.class, () -> with(name, value));
        assertTrue(e.getMessage().contains(name + "=" + value), e.getMessage());
        assertTrue(e.getMessage().contains("accepted: " + accepted), e.getMessage());
    }

    @Test
    void theCrossNodePathIsOffUnlessConfigured() {
        RemoteConfig r = TransportConfig.from(name -> null).remote();
        assertFalse(r.enabled());
        assertEquals(RemoteConfig.TIMEOUT_DEFAULT, r.timeout());
        assertNull(r.secret());
        assertFalse(r.tls());
        assertEquals(RemoteConfig.MAX_INFLIGHT_MB_DEFAULT << 20, r.maxInFlightBytes());
    }

    @Test
    void entitiesAtAnotherEndpointThanOursAreRemote() {
        RemoteConfig r = TransportConfig.from(Map.of(
            RemoteConfig.ENTITIES, " prefill=10.0.0.1:40123 , decode=10.0.0.2:40123,decode.b=10.0.0.2:40124",
            RemoteConfig.LISTEN, "10.0.0.1:40123",
            RemoteConfig.TIMEOUT_S, "2.5",
            RemoteConfig.SECRET, "s3cret-of-the-deployment",
            TransportConfig.DEPLOYMENT_TOKEN, "launch-token",
            RemoteConfig.MAX_INFLIGHT_MB, "64")::get).remote();
        assertTrue(r.enabled());
        assertFalse(r.isRemote("prefill"), "at our own endpoint");
        assertTrue(r.isRemote("decode"));
        assertTrue(r.isRemote("decode.b"));
        assertFalse(r.isRemote("tokenizer"), "not in the map: shared memory");
        assertEquals("10.0.0.2:40124", r.endpointOf("decode.b"));
        assertEquals(Duration.ofMillis(2500), r.timeout());
        assertArrayEquals("s3cret-of-the-deployment".getBytes(StandardCharsets.UTF_8), r.secret());
        assertEquals(RemoteConfig.SECRET, r.secretSource(), "the dedicated knob before the deployment token");
        assertFalse(r.toString().contains("s3cret"), r.toString());
        assertEquals(64L << 20, r.maxInFlightBytes());
    }

    @Test
    void theDeploymentTokenIsTheSecretWhenNoneOfItsOwnIsSet() {
        String token = "5f0c2a9e71d84b3c9a6e0f1d2c3b4a59"; // 32 hex digits: 128 bits
        RemoteConfig r = TransportConfig.from(Map.of(TransportConfig.DEPLOYMENT_TOKEN, token)::get).remote();
        assertArrayEquals(token.getBytes(StandardCharsets.UTF_8), r.secret());
        assertEquals(TransportConfig.DEPLOYMENT_TOKEN, r.secretSource());
    }

    /**
     * A token short enough to guess (the namespace, 64 bits of a hash of it, is readable by every local user
     * and lets it be searched offline) is not a secret: the remote path then has none and refuses to start,
     * naming why; the local deployment still uses it for its names.
     */
    @ParameterizedTest
    @CsvSource({"launch-token", "x", "01234", "deadbeefdeadbeefdeadbeefdeadbee"})
    void aShortDeploymentTokenIsNotTakenForTheSecret(String token) {
        TransportConfig c = TransportConfig.from(Map.of(TransportConfig.DEPLOYMENT_TOKEN, token)::get);
        assertNull(c.remote().secret());
        assertTrue(c.remote().secretSource().contains("bits"), c.remote().secretSource());
        assertEquals(token, c.deploymentToken());
    }

    @Test
    void entropyIsCountedByLengthAndAlphabet() {
        assertEquals(128, RemoteConfig.entropyBits("0123456789abcdef0123456789abcdef"), 1e-9);
        assertTrue(RemoteConfig.entropyBits("Zm9vYmFyYmF6cXV4cXV1eHF1dXg") > 128, "27 base64 characters");
        assertTrue(RemoteConfig.entropyBits("correct horse") < 128);
    }

    @ParameterizedTest
    @CsvSource({"x", "fifteen-bytes!!"})
    void aShortSecretIsRefused(String secret) {
        ConfigurationException e = assertThrows(ConfigurationException.class,
            () -> TransportConfig.from(Map.of(RemoteConfig.SECRET, secret)::get));
        assertTrue(e.getMessage().contains(RemoteConfig.SECRET) && e.getMessage().contains("at least 16 bytes"),
            e.getMessage());
        assertTrue(secret.length() < 4 || !e.getMessage().contains(secret), "the secret is never shown: " + e.getMessage());
    }

    @Test
    void aSecretFileOthersCanReadIsRefused() throws Exception {
        Path file = Files.createTempFile("mstar-secret-", "");
        try {
            Files.writeString(file, "0123456789abcdef0123\n");
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
            ConfigurationException e = assertThrows(ConfigurationException.class,
                () -> with(RemoteConfig.SECRET_FILE, file.toString()));
            assertTrue(e.getMessage().contains("chmod 600"), e.getMessage());
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
            assertArrayEquals("0123456789abcdef0123".getBytes(StandardCharsets.UTF_8),
                TransportConfig.from(Map.of(RemoteConfig.SECRET_FILE, file.toString())::get).remote().secret());
        } finally {
            Files.delete(file);
        }
    }

    @ParameterizedTest
    @CsvSource(delimiter = ';', value = {
        "MSTAR_REMOTE_ENTITIES;decode",
        "MSTAR_REMOTE_ENTITIES;decode=10.0.0.2",
        "MSTAR_REMOTE_ENTITIES;decode=10.0.0.2:0",
        "MSTAR_REMOTE_ENTITIES;decode=10.0.0.2:1,decode=10.0.0.3:1",
        "MSTAR_REMOTE_ENTITIES;../x=10.0.0.2:1",
        "MSTAR_REMOTE_LISTEN;10.0.0.1",
        "MSTAR_REMOTE_LISTEN;:40123",
        "MSTAR_REMOTE_TIMEOUT_S;0",
        "MSTAR_REMOTE_TIMEOUT_S;soon",
        "MSTAR_REMOTE_MAX_INFLIGHT_MB;0",
        "MSTAR_REMOTE_SECRET_FILE;relative/secret",
        "MSTAR_REMOTE_SECRET_FILE;/nonexistent/secret",
        "MSTAR_REMOTE_TLS_KEYSTORE;/nonexistent.p12"})
    void aBadCrossNodeValueIsRefusedNamingTheVariable(String name, String value) {
        ConfigurationException e = assertThrows(ConfigurationException.class, () -> with(name, value));
        assertTrue(e.getMessage().contains(name + "=" + value), e.getMessage());
        assertTrue(e.getMessage().contains("accepted"), e.getMessage());
    }
}
