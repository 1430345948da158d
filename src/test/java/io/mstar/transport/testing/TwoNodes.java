package io.mstar.transport.testing;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * Two "nodes" on this machine for the cross-node path: each its own shared-memory directory (neither sees
 * the other's files) and its own TCP endpoint on 127.0.0.1, one secret; the producer entity lives on node A,
 * the consumer on node B. {@link #close()} fails when either directory still holds a file, then removes both.
 */
public final class TwoNodes implements AutoCloseable {
    public final Path dirA;
    public final Path dirB;
    public final String endpointA;
    public final String endpointB;
    /** A second receiving entity's endpoint on node B, or null (give it as {@code MSTAR_REMOTE_LISTEN}). */
    public final String endpointB2;
    /** The deployment's secret both nodes hold ({@code MSTAR_REMOTE_SECRET}). */
    public static final String SECRET = "two-nodes-test-secret-0123456789";
    private final String entities;

    public TwoNodes(String producer, String consumer) throws IOException {
        this(producer, consumer, null);
    }

    /** As {@link #TwoNodes(String, String)}, with a second consumer on node B at its own port. */
    public TwoNodes(String producer, String consumer, String secondConsumer) throws IOException {
        dirA = Files.createTempDirectory(ShmTestDir.SHM, "mstar-nodeA-");
        dirB = Files.createTempDirectory(ShmTestDir.SHM, "mstar-nodeB-");
        int[] ports = freePorts();
        endpointA = "127.0.0.1:" + ports[0];
        endpointB = "127.0.0.1:" + ports[1];
        endpointB2 = secondConsumer == null ? null : "127.0.0.1:" + freePorts()[0];
        entities = producer + "=" + endpointA + "," + consumer + "=" + endpointB
            + (secondConsumer == null ? "" : "," + secondConsumer + "=" + endpointB2);
    }

    /** The environment of a process on node A ({@code nodeA} true) or B, with {@code extra} name/value pairs. */
    public Map<String, String> env(boolean nodeA, String... extra) {
        Map<String, String> env = new HashMap<>(Map.of(
            TransportConfig.SHM_DIR, (nodeA ? dirA : dirB).toString(),
            TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "64",
            RemoteConfig.LISTEN, nodeA ? endpointA : endpointB,
            RemoteConfig.ENTITIES, entities,
            RemoteConfig.SECRET, SECRET));
        for (int i = 0; i < extra.length; i += 2) {
            env.put(extra[i], extra[i + 1]);
        }
        return env;
    }

    public TransportConfig config(boolean nodeA, String... extra) {
        return TransportConfig.from(env(nodeA, extra)::get);
    }

    /** Two TCP ports nobody bound a moment ago (the kernel's choice), distinct. */
    public static int[] freePorts() throws IOException {
        try (ServerSocket a = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
             ServerSocket b = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return new int[] {a.getLocalPort(), b.getLocalPort()};
        }
    }

    @Override
    public void close() throws IOException {
        List<String> leftA = ShmTestDir.list(dirA);
        List<String> leftB = ShmTestDir.list(dirB);
        ShmTestDir.deleteTree(dirA);
        ShmTestDir.deleteTree(dirB);
        if (!leftA.isEmpty() || !leftB.isEmpty()) {
            fail("files left: node A " + leftA + ", node B " + leftB);
        }
    }
}
