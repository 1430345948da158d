package io.mstar.transport.lifecycle;

import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/**
 * A worker that joins the node budget while its creator has made the file and not yet written it (a creator
 * descheduled for seconds on a busy node: eight JVMs starting on two cores) waits for it, instead of failing
 * after the lock's two seconds as it once did in CI; one that finds the file made and still empty (the creator
 * between its open and its fallocate) waits too, instead of crashing on a short read as it once did in CI.
 */
class NodeBudgetReadyTest {
    private static final long MAGIC = 0x7465_6775_6272_736dL;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void aJoinerWaitsForACreatorThatIsSlowToWriteTheFile() throws Exception {
        joinWhileTheCreatorHolds(NodeBudget.FILE_BYTES, NodeBudget.LOCK_WAIT_NS / 1_000_000 + 1000);
    }

    @Test
    void aJoinerWaitsForACreatorThatHasNotSizedTheFileYet() throws Exception {
        joinWhileTheCreatorHolds(0, 300);
    }

    // Makes the file with `length` zero bytes, lets a joiner start, and writes the header `holdMs` later.
    private void joinWhileTheCreatorHolds(int length, long holdMs) throws Exception {
        Namespace namespace = Namespace.of("budget-ready-test-token", "pipe");
        Path file = shm.path().resolve(ShmNames.budget(namespace));
        long budget = 64L << 20;
        try (FileChannel creator = FileChannel.open(file, java.util.Set.of(StandardOpenOption.CREATE_NEW,
            StandardOpenOption.READ, StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(
            PosixFilePermissions.fromString("rw-------")))) {
            creator.write(ByteBuffer.allocate(length), 0); // made, not yet ready
            CompletableFuture<NodeBudget> joined = CompletableFuture.supplyAsync(
                () -> NodeBudget.join(shm.path(), namespace, budget, Owner.newNonce()));
            Thread.sleep(holdMs);
            assertFalse(joined.isDone(), () -> "gave up on, or crashed at, a creator still making the file: " + joined);
            creator.write(ByteBuffer.allocate(NodeBudget.FILE_BYTES - 16), 16);
            creator.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(budget).flip(), 8);
            creator.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(MAGIC).flip(), 0);
            try (NodeBudget joiner = joined.get(30, TimeUnit.SECONDS)) {
                assertEquals(budget, joiner.budgetBytes());
            }
        }
    }
}
