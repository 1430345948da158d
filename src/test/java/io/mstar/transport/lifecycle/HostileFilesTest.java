package io.mstar.transport.lifecycle;

import io.mstar.transport.DType;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.spill.FileTransport;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Files planted at the names the library is about to use, and the modes of what it creates. */
class HostileFilesTest {
    private static final Namespace NS = Namespace.of(null, "hostile");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void everyFileTheLibraryCreatesIsOwnerOnly() throws Exception {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString())::get);
        try (ArenaTransport arena = new ArenaTransport(config, new SegmentedArena(shm.path(), NS, "p", 1 << 20, 1), false);
             FileTransport files = FileTransport.open(shm.deployment("hostile", "f"));
             ShmMailbox mailbox = ShmMailbox.open(shm.deployment("hostile", "m"))) {
            TensorDescriptor a = arena.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[10]), 10))).getFirst();
            TensorDescriptor s = files.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[10]), 10))).getFirst();
            String stats = "mstar_" + NS.id() + "_stats_p_" + a.fileName().split("_")[4]; // published at once
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!ShmTestDir.list(shm.path()).contains(stats)) {
                assertTrue(System.nanoTime() < deadline, "no stats file: " + ShmTestDir.list(shm.path()));
                Thread.sleep(10);
            }
            List<String> created = ShmTestDir.list(shm.path());
            assertEquals(List.of(a.fileName(), ShmNames.mailbox(NS, "m"), s.fileName(), stats).stream().sorted().toList(),
                created);
            for (String name : created) {
                assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(shm.path().resolve(name),
                    LinkOption.NOFOLLOW_LINKS)), name);
            }
            arena.ack(List.of(a.uuid()));
            files.ack(List.of(s.uuid()));
            assertNotEquals(0, mailbox.entity().length());
        }
    }

    @Test
    void aPlantedSymlinkOrFileIsNeverFollowedOrTruncated() throws Exception {
        Path victim = Files.writeString(shm.path().resolve("victim"), "precious");
        // A link planted at the mailbox's name has no owner: it is removed (never followed) and the mailbox made.
        Path mailboxName = shm.path().resolve(ShmNames.mailbox(NS, "m"));
        Files.createSymbolicLink(mailboxName, victim);
        try (ShmMailbox mailbox = ShmMailbox.open(shm.deployment("hostile", "m"))) {
            assertTrue(!Files.isSymbolicLink(mailboxName) && Files.size(mailboxName) > 8, "our mailbox took the name");
        }
        assertEquals("precious", Files.readString(victim));

        // A file already at the next segment's name: the arena skips to another name.
        try (SegmentedArena arena = new SegmentedArena(shm.path(), NS, "p", 1 << 20, 2)) {
            long first = arena.reserve(1 << 20);
            String taken = arena.segmentName(first).replaceAll("_0$", "_1");
            Files.writeString(shm.path().resolve(taken), "squatter");
            long second = arena.reserve(1 << 20);
            assertNotEquals(taken, arena.segmentName(second));
            assertEquals("squatter", Files.readString(shm.path().resolve(taken)));
            Files.delete(shm.path().resolve(taken));
        }
        Files.delete(victim);
    }

    @Test
    void theStartupSweepRemovesPlantedLinksOfDeadNamespacesWithoutTouchingTheirTargets() throws Exception {
        Path victim = Files.writeString(shm.path().resolve("victim"), "precious");
        Files.createSymbolicLink(shm.path().resolve(ShmNames.mailbox(NS, "gone")), victim);
        List<Reclaimer.Removed> removed = Reclaimer.sweep(shm.path());
        assertEquals(List.of(new Reclaimer.Removed(ShmNames.mailbox(NS, "gone"), 0)), removed);
        assertEquals("precious", Files.readString(victim));
        Files.delete(victim);
    }
}
