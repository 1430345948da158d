package io.mstar.transport.lifecycle;

import io.mstar.transport.DType;
import io.mstar.transport.NativeCallException;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.channel.ShmMailbox;
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
import static org.junit.jupiter.api.Assertions.assertThrows;
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
             FileTransport files = new FileTransport(shm.path(), NS, "f");
             ShmMailbox mailbox = ShmMailbox.open(shm.path(), NS, "m")) {
            TensorDescriptor a = arena.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[10]), 10))).getFirst();
            TensorDescriptor s = files.send("r", List.of(Tensor.of(DType.U8, MemorySegment.ofArray(new byte[10]), 10))).getFirst();
            List<String> created = ShmTestDir.list(shm.path());
            assertTrue(created.containsAll(List.of(NamespaceLock.fileName(NS), a.fileName(), s.fileName(),
                ShmNames.mailbox(NS, "m"))), created.toString());
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
        try (FileTransport holder = new FileTransport(shm.path(), NS, "f")) {
            // The namespace is live: a file planted at the mailbox's name makes its creation fail.
            Path mailboxName = shm.path().resolve(ShmNames.mailbox(NS, "m"));
            Files.createSymbolicLink(mailboxName, victim);
            NativeCallException e = assertThrows(NativeCallException.class, () -> ShmMailbox.open(shm.path(), NS, "m"));
            assertEquals("EEXIST", e.errnoName(), e.getMessage());
            assertTrue(e.getMessage().contains(mailboxName.toString()), e.getMessage());
            assertEquals("precious", Files.readString(victim));
            Files.delete(mailboxName);

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
            assertTrue(holder.inFlight() == 0);
        }

        // Nobody holds the namespace: a symlink at its lock name is refused, never followed.
        Path lockName = shm.path().resolve(NamespaceLock.fileName(NS));
        Files.createSymbolicLink(lockName, victim);
        NativeCallException loop = assertThrows(NativeCallException.class, () -> new FileTransport(shm.path(), NS, "f"));
        assertEquals("ELOOP", loop.errnoName(), loop.getMessage());
        assertEquals("precious", Files.readString(victim));
        Files.delete(lockName);
        Files.delete(victim);
    }

    @Test
    void theStartupSweepRemovesPlantedLinksOfDeadNamespacesWithoutTouchingTheirTargets() throws Exception {
        Path victim = Files.writeString(shm.path().resolve("victim"), "precious");
        Files.createSymbolicLink(shm.path().resolve(ShmNames.mailbox(NS, "gone")), victim);
        List<String> removed = Reclaimer.reclaimDead(shm.path());
        assertEquals(List.of(ShmNames.mailbox(NS, "gone"), NamespaceLock.fileName(NS)), removed);
        assertEquals("precious", Files.readString(victim));
        Files.delete(victim);
    }
}
