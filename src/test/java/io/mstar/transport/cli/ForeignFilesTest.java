package io.mstar.transport.cli;

import io.mstar.transport.Deployment;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.exceptions.EntityInUseException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Another user's entries at names like ours, in a sticky directory every user may write (as
 * {@code /dev/shm} is): planted by uid 65534 through {@code setpriv}, so the test needs root (skipped,
 * with the reason, otherwise). None of them stops our processes from starting, the sweep or {@code reclaim},
 * and none is removed unless root asks for every user's.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ForeignFilesTest {
    private static final int OTHER_UID = 65534;
    private static final String ENDPOINT = "foreign";
    private static final Namespace NS = Namespace.of(null, ENDPOINT);

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private Path victim;
    private List<String> planted;

    @BeforeEach
    void plantAsAnotherUser() throws Exception {
        assumeTrue(Posix.geteuid() == 0, "needs root, to plant files as another uid with setpriv");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")), "needs /usr/bin/setpriv (util-linux)");
        Files.setPosixFilePermissions(shm.path(), PosixFilePermissions.fromString("rwxrwxrwx"));
        assertEquals(0, new ProcessBuilder("chmod", "1777", shm.path().toString()).start().waitFor());
        victim = Files.writeString(shm.path().resolve("victim"), "precious");
        planted = List.of(
            ShmNames.mailbox(NS, "gone"),                      // a link to our file
            ShmNames.mailbox(NS, "worker"),                    // a squatter on a mailbox we need
            "mstar_" + NS.id() + "_arena_x_0badf00d_0",        // a look-alike segment nobody locks
            "mstar_" + NS.id() + "_aeron_x_0badf00d",          // a look-alike driver directory
            "mstar-demo-0badf00d",                             // a look-alike demo directory
            ShmNames.mailbox(NS, "fifo"));                     // a FIFO where a peer's mailbox would be
        String d = shm.path().toString();
        String script = "ln -s " + victim + " " + d + "/" + planted.get(0)
            + " && printf x > " + d + "/" + planted.get(1) + " && chmod 600 " + d + "/" + planted.get(1)
            + " && printf y > " + d + "/" + planted.get(2)
            + " && mkdir " + d + "/" + planted.get(3) + " " + d + "/" + planted.get(4)
            + " && printf z > " + d + "/" + planted.get(3) + "/cnc.dat"
            + " && mkfifo -m 666 " + d + "/" + planted.get(5);
        Process p = new ProcessBuilder("/usr/bin/setpriv", "--reuid=" + OTHER_UID, "--regid=" + OTHER_UID,
            "--clear-groups", "sh", "-c", script).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), "planting as uid " + OTHER_UID + " failed: " + out);
    }

    @AfterEach
    void removePlanted() throws Exception {
        if (planted != null) {
            for (String name : planted) {
                ShmTestDir.deleteTree(shm.path().resolve(name));
                Files.deleteIfExists(shm.path().resolve(name));
            }
            Files.deleteIfExists(victim);
        }
    }

    @Test
    void theSweepAndOurProcessesLeaveOtherUsersEntriesAndStart() {
        assertEquals(List.of(), Reclaimer.sweep(shm.path()));
        Deployment deployment = ShmTestDir.deployment(shm.path(), ENDPOINT, "gone");
        try (TensorTransport transport = TensorTransports.create(Deployment.of(TransportConfig.from(Map.of(
                 TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
                 TransportConfig.SEGMENT_MB, "1", TransportConfig.MAX_SEGMENTS, "1")::get), ENDPOINT, "producer"), false);
             ShmMailbox other = ShmMailbox.open(ShmTestDir.deployment(shm.path(), ENDPOINT, "other"))) {
            assertTrue(transport.statsSummary() != null && other.entity().equals("other"));
            // The link at "gone"'s mailbox is another user's: left, and the mailbox cannot be made there.
            EntityInUseException linked = assertThrows(EntityInUseException.class, () -> ShmMailbox.open(deployment));
            assertTrue(linked.getMessage().contains("ownerUid=" + OTHER_UID), linked.getMessage());
        }
        assertAllPlantedRemain();
    }

    @Test
    void aSquattedMailboxNameIsReportedWithItsOwnerAndTheFix() {
        long start = System.nanoTime();
        EntityInUseException e = assertThrows(EntityInUseException.class,
            () -> ShmMailbox.open(ShmTestDir.deployment(shm.path(), ENDPOINT, "worker")));
        assertTrue(e.getMessage().contains(shm.path().resolve(planted.get(1)).toString())
            && e.getMessage().contains("ownerUid=" + OTHER_UID) && e.getMessage().contains("MSTAR_SHM_DIR"), e.getMessage());
        assertTrue(System.nanoTime() - start < 1_500_000_000L, "said at once, not after the live owner's wait");
        assertAllPlantedRemain();
    }

    @Test
    void reclaimRemovesOnlyTheInvokingUsersFilesUnlessRootAsksForEveryUsers() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream print = new PrintStream(out, true, StandardCharsets.UTF_8);
        assertEquals(0, MstarShm.run(new String[] {"doctor", "--dir", shm.path().toString()}, print, print), out.toString());
        assertEquals(0, MstarShm.run(new String[] {"reclaim", "--dir", shm.path().toString(), "--yes"}, print, print),
            out.toString());
        assertAllPlantedRemain();

        assertEquals(0, MstarShm.run(new String[] {"reclaim", "--dir", shm.path().toString(), "--yes", "--all-users"},
            print, print), out.toString());
        for (String name : planted) {
            assertTrue(Files.notExists(shm.path().resolve(name), LinkOption.NOFOLLOW_LINKS), name + " left: " + out);
        }
        assertEquals("precious", readVictim());
    }

    /**
     * A FIFO at a peer's mailbox name: opened to probe the peer's lock, it would block until a writer came
     * (and root may open any FIFO). Opened without waiting and found not to be a file, it is no peer:
     * {@code awaitPeer} says so within its timeout, and a send fails at once.
     */
    @Test
    void aFifoAtAPeersMailboxNameNeitherHangsAwaitPeerNorPassesForThePeer() {
        try (ShmMailbox me = ShmMailbox.open(ShmTestDir.deployment(shm.path(), ENDPOINT, "me"))) {
            long start = System.nanoTime();
            boolean alive = assertTimeoutPreemptively(Duration.ofSeconds(8), () -> me.awaitPeer("fifo",
                Duration.ofSeconds(2)), "awaitPeer hung on the FIFO");
            long tookMs = (System.nanoTime() - start) / 1_000_000;
            assertFalse(alive, "a FIFO passed for a live peer");
            assertTrue(tookMs < 4000, "awaitPeer(2 s) took " + tookMs + " ms");
            assertTimeoutPreemptively(Duration.ofSeconds(5), () -> assertThrows(PeerUnavailableException.class,
                () -> me.sendAcks("fifo", List.of(java.util.UUID.randomUUID()))), "a send hung on the FIFO");
        }
        assertAllPlantedRemain();
    }

    private void assertAllPlantedRemain() {
        for (String name : planted) {
            assertTrue(Files.exists(shm.path().resolve(name), LinkOption.NOFOLLOW_LINKS), name + " was removed");
        }
        assertTrue(Files.exists(shm.path().resolve(planted.get(3)).resolve("cnc.dat")), "the look-alike directory was emptied");
        assertEquals("precious", readVictim());
    }

    private String readVictim() {
        try {
            return Files.readString(victim);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

}
