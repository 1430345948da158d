package io.mstar.transport.channel;

import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.exceptions.EntityInUseException;
import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.lifecycle.DirectoryEntries;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.shm.MappedSegment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;

/**
 * Making an entity's mailbox file ({@link MailboxDescriptor}'s layout): taking the place of a dead predecessor,
 * refusing a live one's or another user's, and checking first that the JVM lets Agrona's buffers work.
 */
final class MailboxFile {
    private static final Logger LOG = LoggerFactory.getLogger(ShmMailbox.class);

    private MailboxFile() {
    }

    // A mailbox already at the name is a dead predecessor's (removed, then ours is made) or a live owner's.
    static MappedSegment create(Path dir, String name) {
        long deadline = System.nanoTime() + ShmMailbox.TAKE_OVER_TIMEOUT_MS * 1_000_000L;
        while (true) {
            try {
                return MappedSegment.create(dir, name, MailboxDescriptor.FILE_BYTES);
            } catch (NativeCallException e) {
                if (e.errno() != Posix.EEXIST) {
                    throw e;
                }
            }
            if (Reclaimer.reclaimIfDead(dir, name) >= 0) {
                LOG.info("took the place of a dead process of the same entity: removed its mailbox {}", name);
                continue;
            }
            int ownerUid = DirectoryEntries.ownerUid(dir.resolve(name));
            if (ownerUid >= 0 && ownerUid != Posix.geteuid()) {
                throw new EntityInUseException("another user's file takes this entity's mailbox name: path="
                    + dir.resolve(name) + ", ownerUid=" + ownerUid + ", ourUid=" + Posix.geteuid() + ": remove it (as"
                    + " its owner or root), or give the deployment a directory no other user can write (MSTAR_SHM_DIR,"
                    + " docs/security.md)");
            }
            if (System.nanoTime() > deadline) {
                throw new EntityInUseException("another live process runs as this entity in this deployment (it holds"
                    + " the mailbox): path=" + dir.resolve(name) + ": give each process its own entity, or stop the"
                    + " other one first");
            }
            PeerMailboxes.sleepMs(10); // a sweep or a peer's probe holds it for a moment, or its owner lives
        }
    }

    /** Fails, naming the flag, when Agrona's buffers could not reach {@code jdk.internal.misc}. */
    public static void checkAgronaAccess() {
        Module agrona;
        try {
            agrona = Class.forName("org.agrona.concurrent.UnsafeBuffer", false, MailboxFile.class.getClassLoader()).getModule();
        } catch (ClassNotFoundException e) {
            throw new ConfigurationException("the mailbox needs Agrona (org.agrona:agrona) on the class path");
        }
        if (!Object.class.getModule().isExported("jdk.internal.misc", agrona)) {
            String target = agrona.isNamed() ? agrona.getName() : "ALL-UNNAMED";
            throw new ConfigurationException("the shared-memory mailbox needs a JVM flag: add --add-exports"
                + " java.base/jdk.internal.misc=" + target + " to the java command (Agrona 2.6 on JDK "
                + Runtime.version().feature() + "); transports without the mailbox do not need it");
        }
    }
}
