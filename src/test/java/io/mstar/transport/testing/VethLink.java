package io.mstar.transport.testing;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TransportConfig;
import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Two nodes with a real network between them: two network namespaces joined by a veth pair, a shared-memory
 * directory per node, node A running "prefill" and node B "decode". By address ({@link #create()}), or by name
 * ({@link #createNamed()}: the map says {@code prefill.node} and {@code decode.node}, which a hosts file of the
 * link's resolves, read by each JVM at every lookup), so that node B can move to another address. Skips the test
 * where namespaces cannot be made (no root, no iproute2).
 */
public final class VethLink implements AutoCloseable {
    private static final String PORT = ":40123";
    final String tag = Integer.toHexString(ThreadLocalRandom.current().nextInt(0x1000, 0xffff));
    private final String nsA = "mstar-a-" + tag;
    private final String nsB = "mstar-b-" + tag;
    private final String devA = "mva" + tag;
    private final String devB = "mvb" + tag;
    private final String subnet = "10.213." + ThreadLocalRandom.current().nextInt(1, 250) + ".";
    private final boolean named;
    private final Path hosts;
    public final Path dirA;
    public final Path dirB;
    public final Path work;
    private String ipB;

    private VethLink(boolean named) throws IOException {
        this.named = named;
        dirA = Files.createTempDirectory(ShmTestDir.SHM, "mstar-netnsA-");
        dirB = Files.createTempDirectory(ShmTestDir.SHM, "mstar-netnsB-");
        work = Files.createTempDirectory("mstar-netns-");
        hosts = work.resolve("hosts");
        ipB = subnet + "2";
    }

    /** Entities placed by address. */
    public static VethLink create() throws Exception {
        return make(new VethLink(false));
    }

    /** Entities placed by name, resolved through the link's hosts file. */
    public static VethLink createNamed() throws Exception {
        return make(new VethLink(true));
    }

    private static VethLink make(VethLink link) throws Exception {
        boolean made = false;
        try {
            Assumptions.assumeTrue(run("ip", "netns", "add", link.nsA) == 0,
                "skipped: network namespaces need root and iproute2 (ip netns add failed)");
            assertEquals(0, run("ip", "netns", "add", link.nsB));
            assertEquals(0, run("ip", "link", "add", link.devA, "netns", link.nsA, "type", "veth", "peer", "name",
                link.devB, "netns", link.nsB));
            assertEquals(0, run("ip", "-n", link.nsA, "addr", "add", link.subnet + "1/24", "dev", link.devA));
            assertEquals(0, run("ip", "-n", link.nsB, "addr", "add", link.ipB + "/24", "dev", link.devB));
            for (String[] up : new String[][] {{link.nsA, link.devA}, {link.nsB, link.devB}, {link.nsA, "lo"},
                {link.nsB, "lo"}}) {
                assertEquals(0, run("ip", "-n", up[0], "link", "set", up[1], "up"));
            }
            link.writeHosts();
            made = true;
            return link;
        } finally {
            if (!made) {
                link.close();
            }
        }
    }

    /** A JVM on node A, with the environment of entity "prefill" and {@code extra} pairs. */
    public ChildJvm startA(Class<?> main, Map<String, String> extra, String... args) throws IOException {
        return start(nsA, dirA, "prefill", extra, main, args);
    }

    /** A JVM on node B, with the environment of entity "decode" and {@code extra} pairs. */
    public ChildJvm startB(Class<?> main, Map<String, String> extra, String... args) throws IOException {
        return start(nsB, dirB, "decode", extra, main, args);
    }

    private ChildJvm start(String ns, Path dir, String entity, Map<String, String> extra, Class<?> main,
                           String... args) throws IOException {
        Map<String, String> env = new HashMap<>(Map.of(TransportConfig.SHM_DIR, dir.toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "64", RemoteConfig.LISTEN, endpointOf(entity),
            RemoteConfig.ENTITIES, "prefill=" + endpointOf("prefill") + ",decode=" + endpointOf("decode"),
            RemoteConfig.SECRET, TwoNodes.SECRET, RemoteConfig.TIMEOUT_S, "2"));
        env.putAll(extra);
        List<String> jvm = named ? List.of("-Djdk.net.hosts.file=" + hosts, "-Dsun.net.inetaddr.ttl=0",
            "-Dsun.net.inetaddr.negative.ttl=0") : List.of();
        return ChildJvm.startUnder(List.of("ip", "netns", "exec", ns), true, jvm, env, main, args);
    }

    private String endpointOf(String entity) {
        if (named) {
            return entity + ".node" + PORT;
        }
        return (entity.equals("prefill") ? subnet + "1" : ipB) + PORT;
    }

    /** Partitions the nodes: node A's end of the link goes down. */
    public void down() throws Exception {
        assertEquals(0, run("ip", "-n", nsA, "link", "set", devA, "down"));
    }

    public void up() throws Exception {
        assertEquals(0, run("ip", "-n", nsA, "link", "set", devA, "up"));
    }

    /** Shapes node A's side of the link to {@code rate} (tc's words: "1gbit"), or lifts the shaping (null). */
    public void shape(String rate) throws Exception {
        if (rate == null) {
            assertEquals(0, run("ip", "netns", "exec", nsA, "tc", "qdisc", "del", "dev", devA, "root"));
        } else {
            assertEquals(0, run("ip", "netns", "exec", nsA, "tc", "qdisc", "add", "dev", devA, "root", "tbf", "rate",
                rate, "burst", "256kb", "latency", "50ms"));
        }
    }

    /**
     * Node B takes the next address of the subnet and gives up its old one; its name resolves to the new one from
     * now on (named links only). Its process must be restarted to listen there.
     */
    public String moveB() throws Exception {
        String old = ipB;
        ipB = subnet + (Integer.parseInt(old.substring(old.lastIndexOf('.') + 1)) + 1);
        // The old one first: deleting a primary address deletes the secondaries of its subnet with it.
        assertEquals(0, run("ip", "-n", nsB, "addr", "del", old + "/24", "dev", devB));
        assertEquals(0, run("ip", "-n", nsB, "addr", "add", ipB + "/24", "dev", devB));
        writeHosts();
        return ipB;
    }

    // Replaced whole (a new file moved over the old), so no lookup reads it half written.
    private void writeHosts() throws IOException {
        Path next = Files.writeString(work.resolve("hosts.next"), subnet + "1 prefill.node\n" + ipB + " decode.node\n");
        Files.move(next, hosts, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    public void assertNothingLeft() {
        assertEquals(List.of(), ShmTestDir.list(dirA), "files left on node A");
        assertEquals(List.of(), ShmTestDir.list(dirB), "files left on node B");
    }

    @Override
    public void close() throws Exception {
        run("ip", "netns", "del", nsA); // kills the processes' network; their parent watch ends them
        run("ip", "netns", "del", nsB);
        ShmTestDir.deleteTree(dirA);
        ShmTestDir.deleteTree(dirB);
        ShmTestDir.deleteTree(work);
    }

    static int run(String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(new ArrayList<>(List.of(command))).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return -1;
        }
        if (p.exitValue() != 0) {
            System.out.println(String.join(" ", command) + ": " + out.strip());
        }
        return p.exitValue();
    }
}
