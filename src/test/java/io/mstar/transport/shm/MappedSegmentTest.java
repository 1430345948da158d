package io.mstar.transport.shm;

import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.testing.ShmTestDir;
import io.mstar.transport.testing.SmallTmpfs;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MappedSegmentTest {
    private static final long SIZE = 1 << 20;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void aSliceAskedForAgainIsTheSameObjectAndEverySliceIsExactlyItsRange() {
        try (MappedSegment own = MappedSegment.create(shm.path(), "slices", SIZE)) {
            MemorySegment first = own.slice(4096, 100);
            assertSame(first, own.slice(4096, 100), "the same range again: no new segment");
            java.util.SplittableRandom random = new java.util.SplittableRandom(31);
            for (int k = 0; k < 100_000; k++) { // ranges that share a cache entry get their own slices
                long offset = random.nextLong(SIZE / 64) * 64;
                long nbytes = 1 + random.nextLong(Math.min(SIZE - offset, 8192));
                MemorySegment slice = own.slice(offset, nbytes);
                assertEquals(own.memory().address() + offset, slice.address(), "offset " + offset);
                assertEquals(nbytes, slice.byteSize(), "offset " + offset);
            }
        }
    }

    @Test
    void createsExclusiveOwnerOnlyCommittedFileAndPeerSeesTheBytes() throws IOException {
        long availableBefore = Posix.statvfs(shm.path().toString()).availableBytes();
        try (MappedSegment own = MappedSegment.create(shm.path(), "seg", SIZE)) {
            Path file = shm.path().resolve("seg");
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
            assertEquals(SIZE, Files.size(file));
            // Committed: the file system already gave every page, it is not a sparse file.
            long taken = availableBefore - Posix.statvfs(shm.path().toString()).availableBytes();
            assertTrue(taken >= SIZE, "committed bytes: " + taken);
            own.memory().set(JAVA_LONG, SIZE - 8, 0x1234_5678_9ABC_DEF0L);
            try (MappedSegment peer = MappedSegment.openPeer(shm.path(), "seg", SIZE)) {
                assertEquals(0x1234_5678_9ABC_DEF0L, peer.memory().get(JAVA_LONG, SIZE - 8));
                assertTrue(peer.memory().isReadOnly());
                assertThrows(IllegalArgumentException.class, () -> peer.memory().set(JAVA_LONG, 0, 1L));
                peer.close();
                assertTrue(Files.exists(file), "closing a peer mapping never removes the owner's file");
            }
        }
        assertFalse(Files.exists(shm.path().resolve("seg")), "closing our segment unlinks it");
    }

    @Test
    void neverReusesOrFollowsAnExistingName() throws IOException {
        Path planted = Files.writeString(shm.path().resolve("taken"), "keep me");
        NativeCallException e = assertThrows(NativeCallException.class,
            () -> MappedSegment.create(shm.path(), "taken", SIZE));
        assertEquals("EEXIST", e.errnoName());
        assertEquals("open", e.call());
        assertTrue(e.getMessage().contains(planted.toString()), e.getMessage());
        assertEquals("keep me", Files.readString(planted), "an existing file is never truncated");

        Path target = Files.writeString(shm.path().resolve("target"), "victim");
        Files.createSymbolicLink(shm.path().resolve("link"), target);
        assertThrows(NativeCallException.class, () -> MappedSegment.create(shm.path(), "link", SIZE));
        assertEquals("victim", Files.readString(target), "a planted symlink is never followed");
        Files.delete(planted);
        Files.delete(target);
        Files.delete(shm.path().resolve("link"));
    }

    @Test
    void closeIsIdempotentAndUnlinkKeepsTheMapping() {
        MappedSegment own = MappedSegment.create(shm.path(), "seg", SIZE);
        own.unlink();
        assertFalse(Files.exists(shm.path().resolve("seg")));
        own.memory().set(JAVA_LONG, 0, 7L);
        assertEquals(7L, own.memory().get(JAVA_LONG, 0), "the mapping outlives the name");
        own.close();
        own.close();
        assertTrue(own.isClosed());
        assertThrows(IllegalStateException.class, () -> own.memory().get(JAVA_LONG, 0));
    }

    @Test
    void peerRefusesMissingSmallSymlinkedDirectoryAndForeignFiles() throws IOException {
        SegmentAccessException missing = assertThrows(SegmentAccessException.class,
            () -> MappedSegment.openPeer(shm.path(), "absent", 1));
        assertTrue(missing.getMessage().contains("ENOENT"), missing.getMessage());

        try (MappedSegment own = MappedSegment.create(shm.path(), "small", 8192)) {
            SegmentAccessException small = assertThrows(SegmentAccessException.class,
                () -> MappedSegment.openPeer(shm.path(), "small", 8193));
            assertTrue(small.getMessage().contains("smaller than needed"), small.getMessage());

            Files.createSymbolicLink(shm.path().resolve("alias"), shm.path().resolve("small"));
            SegmentAccessException link = assertThrows(SegmentAccessException.class,
                () -> MappedSegment.openPeer(shm.path(), "alias", 1));
            assertTrue(link.getMessage().contains("ELOOP"), link.getMessage());
            Files.delete(shm.path().resolve("alias"));
        }

        Files.createDirectory(shm.path().resolve("dir"));
        SegmentAccessException dir = assertThrows(SegmentAccessException.class,
            () -> MappedSegment.openPeer(shm.path(), "dir", 1));
        assertTrue(dir.getMessage().contains("not a regular file"), dir.getMessage());
        Files.delete(shm.path().resolve("dir"));

        Path foreign = Files.write(shm.path().resolve("foreign"), new byte[8192]);
        try {
            UserPrincipal nobody = foreign.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody");
            Files.setOwner(foreign, nobody);
        } catch (IOException e) {
            Files.delete(foreign);
            Assumptions.abort("SKIPPED foreign-owner case: cannot chown to nobody: " + e);
        }
        SegmentAccessException other = assertThrows(SegmentAccessException.class,
            () -> MappedSegment.openPeer(shm.path(), "foreign", 1));
        assertTrue(other.getMessage().contains("another user"), other.getMessage());
        Files.delete(foreign);
        assertFalse(Files.exists(foreign, LinkOption.NOFOLLOW_LINKS));
    }

    @Test
    void fullTmpfsFailsAtCreationNeverLater() throws Exception {
        try (SmallTmpfs tmpfs = SmallTmpfs.mount(16 << 20)) {
            Files.write(tmpfs.path().resolve("filler"), new byte[10 << 20]);
            ShmFullException precheck = assertThrows(ShmFullException.class,
                () -> MappedSegment.create(tmpfs.path(), "seg", 8 << 20));
            assertTrue(precheck.getMessage().contains("availableBytes"), precheck.getMessage());

            // Past the free-space check, the commit itself must fail with ENOSPC and leave no file.
            ShmFullException commit = assertThrows(ShmFullException.class,
                () -> MappedSegment.create(tmpfs.path(), "seg", 8 << 20, false));
            assertTrue(commit.getCause() instanceof NativeCallException n && n.errnoName().equals("ENOSPC"),
                String.valueOf(commit.getCause()));
            assertEquals(List.of("filler"), ShmTestDir.list(tmpfs.path()));

            // What fits is committed: every byte can be written without SIGBUS.
            try (MappedSegment fits = MappedSegment.create(tmpfs.path(), "fits", 4 << 20)) {
                fits.memory().fill((byte) 1);
                assertEquals(1, fits.memory().get(ValueLayout.JAVA_BYTE, (4 << 20) - 1));
            }
            Files.delete(tmpfs.path().resolve("filler"));
        }
    }
}
