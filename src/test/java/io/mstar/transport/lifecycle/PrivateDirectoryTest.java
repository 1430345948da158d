package io.mstar.transport.lifecycle;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.Arena;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The default shared-memory directory: a directory of the user's own under {@code /dev/shm}, made 0700 and
 * checked before use. One that fails the check (another user's, a link, open to others) is refused naming
 * the fix; and what another user plants in {@code /dev/shm} itself (a FIFO, a link, a file at our names)
 * does nothing to a worker that runs with the default.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class PrivateDirectoryTest {
    private static final int OTHER_UID = 65534;
    private static final Path SHM = Path.of("/dev/shm");

    private static Path scratchName() {
        return SHM.resolve("mstar-dirtest-" + Owner.newNonce());
    }

    @Test
    void theDefaultIsMadeOursWithMode0700OnATmpfs() throws Exception {
        Path dir = scratchName();
        try {
            assertEquals(dir, ShmDirectory.ensurePrivate(dir));
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir,
                LinkOption.NOFOLLOW_LINKS)));
            assertEquals(Posix.geteuid(), DirectoryEntries.ownerUid(dir));
            assertEquals(dir, ShmDirectory.ensurePrivate(dir), "an existing directory of ours passes again");
            assertEquals(SHM.resolve("mstar-" + Posix.geteuid()), TransportConfig.defaultShmDir());
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void aLinkOrADirectoryOthersMayEnterIsRefusedNamingTheFix() throws Exception {
        Path target = Files.createDirectory(scratchName());
        Path link = scratchName();
        Path open = scratchName();
        try {
            Files.createSymbolicLink(link, target);
            assertRefused(link, "symbolic link");
            Files.createDirectory(open);
            Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxr-xr-x"));
            assertRefused(open, "mode is 755");
        } finally {
            Files.deleteIfExists(link);
            Files.deleteIfExists(target);
            Files.deleteIfExists(open);
        }
    }

    @Test
    void anotherUsersDirectoryAtTheNameIsRefused() throws Exception {
        assumeRoot();
        Path dir = scratchName();
        try {
            asOtherUser("mkdir -m 700 " + dir);
            assertRefused(dir, "belongs to uid " + OTHER_UID);
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    /**
     * Another user's FIFO at a default worker's mailbox name in {@code /dev/shm}, a link at its peer's, a file
     * at a segment name: the worker does not even look there. It starts, exchanges a tensor with its peer,
     * and everything planted is still there, untouched.
     */
    @Test
    void whatAnotherUserPlantsInDevShmDoesNothingToADefaultWorker() throws Exception {
        assumeRoot();
        String endpoint = "planted-" + Owner.newNonce();
        Namespace ns = Namespace.of(null, endpoint);
        List<Path> planted = new ArrayList<>(List.of(SHM.resolve(ShmNames.mailbox(ns, "worker")),
            SHM.resolve(ShmNames.mailbox(ns, "peer")), SHM.resolve("mstar_" + ns.id() + "_arena_peer_0badf00d_0")));
        try {
            asOtherUser("mkfifo -m 666 " + planted.get(0) + " && ln -s /etc/hostname " + planted.get(1)
                + " && printf x > " + planted.get(2));
            TransportConfig defaults = TransportConfig.from(Map.of(TransportConfig.ARENA, "1",
                TransportConfig.SEGMENT_MB, "1", TransportConfig.MAX_SEGMENTS, "2")::get);
            Deployment worker = Deployment.of(defaults, endpoint, "worker");
            Deployment peer = worker.withEntity("peer");
            assertEquals(TransportConfig.defaultShmDir(), worker.directory());
            try (TensorTransport producer = TensorTransports.create(peer, false);
                 TensorTransport consumer = TensorTransports.create(worker, false);
                 TensorChannel outbox = TensorTransports.mailbox(peer, producer);
                 TensorChannel inbox = TensorTransports.mailbox(worker, consumer);
                 Arena arena = Arena.ofConfined()) {
                assertTrue(outbox.awaitPeer("worker", Duration.ofSeconds(5)));
                byte[] bytes = "not planted".getBytes(StandardCharsets.UTF_8);
                Tensor tensor = Tensor.of(DType.U8, arena.allocateFrom(java.lang.foreign.ValueLayout.JAVA_BYTE, bytes),
                    bytes.length);
                outbox.sendDescriptors("worker", producer.send("r", List.of(tensor)));
                List<TensorDescriptor> got = new ArrayList<>();
                long deadline = System.nanoTime() + 5_000_000_000L;
                while (got.isEmpty() && System.nanoTime() < deadline) {
                    inbox.receive(new TensorChannel.Listener() {
                        @Override
                        public void descriptors(String from, List<TensorDescriptor> batch) {
                            got.addAll(batch);
                        }

                        @Override
                        public void acks(String from, List<java.util.UUID> uuids) {
                        }
                    }, Duration.ofMillis(100));
                }
                assertEquals(1, got.size(), "the tensor did not arrive");
                try (ReceivedTensor t = consumer.receive(got.getFirst())) {
                    assertEquals("not planted", new String(t.data().toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                        StandardCharsets.UTF_8));
                }
                producer.ack(List.of(got.getFirst().uuid()));
            }
            for (Path p : planted) {
                assertEquals(OTHER_UID, DirectoryEntries.ownerUid(p), p + " was touched");
            }
        } finally {
            for (Path p : planted) {
                Files.deleteIfExists(p);
            }
        }
    }

    private static void assertRefused(Path dir, String why) {
        ConfigurationException e = assertThrows(ConfigurationException.class, () -> ShmDirectory.ensurePrivate(dir));
        assertTrue(e.getMessage().contains(why) && e.getMessage().contains("MSTAR_SHM_DIR")
            && e.getMessage().contains(dir.toString()), e.getMessage());
    }

    private static void assumeRoot() {
        assumeTrue(Posix.geteuid() == 0, "needs root, to plant files as another uid with setpriv");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")), "needs /usr/bin/setpriv (util-linux)");
    }

    private static void asOtherUser(String script) throws Exception {
        Process p = new ProcessBuilder("/usr/bin/setpriv", "--reuid=" + OTHER_UID, "--regid=" + OTHER_UID,
            "--clear-groups", "sh", "-c", script).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), "as uid " + OTHER_UID + ": " + script + ": " + out);
    }
}
