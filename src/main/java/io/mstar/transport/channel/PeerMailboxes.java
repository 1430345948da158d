package io.mstar.transport.channel;

import io.mstar.transport.exceptions.MstarTransportException;
import io.mstar.transport.exceptions.NativeCallException;
import io.mstar.transport.exceptions.PeerRejectedException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.posix.OurFile;
import io.mstar.transport.posix.Posix;
import io.mstar.transport.shm.MappedSegment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The sender side of one mailbox: the peers' mailboxes it writes to, each mapped once per incarnation.
 * A cached mapping is trusted for {@value #CHECK_INTERVAL_MS} ms, then its owner's lock is probed: a dead
 * peer's mapping is retired and a new incarnation at the name is mapped; when none lives, the send fails
 * with {@link PeerUnavailableException}. The probe looks at the inode that was mapped, so removing a live
 * mailbox's name by hand does not make its owner look dead.
 *
 * <p>Retired mappings are unmapped by {@link #closeRetired()}, which the owning mailbox calls when no
 * thread is inside a ring (a thread that could still use one is inside, and none that enters later can
 * find one). Thread-safe.
 */
final class PeerMailboxes {
    private static final Logger LOG = LoggerFactory.getLogger(PeerMailboxes.class);
    static final long CHECK_INTERVAL_MS = 100;
    private static final String STARTING = "is starting: its mailbox is not ready yet (wait with awaitPeer)";

    private final Path dir;
    private final Namespace namespace;
    private final String entity; // ours, for messages
    private final Map<String, PeerMailbox> peers = new ConcurrentHashMap<>();
    private final Queue<PeerMailbox> retired = new ConcurrentLinkedQueue<>();
    private final Object mapping = new Object(); // serializes mapping new peers against close
    private boolean closed; // guarded by mapping

    PeerMailboxes(Path dir, Namespace namespace, String entity) {
        this.dir = dir;
        this.namespace = namespace;
        this.entity = entity;
    }

    /**
     * The cached mapping of the peer's live incarnation, or a new mapping of the incarnation that took its
     * place. Call it inside the owning mailbox's ring guard.
     *
     * @throws PeerUnavailableException when the peer never started, or died and has not come back
     * @throws IllegalStateException    when the mailbox is closing
     */
    PeerMailbox get(String toEntity) {
        PeerMailbox known = peers.get(toEntity);
        if (known != null) {
            long now = System.nanoTime();
            if (now - known.nextCheckNs < 0) {
                return known;
            }
            known.nextCheckNs = now + CHECK_INTERVAL_MS * 1_000_000L;
            if (known.ownerAlive()) {
                return known;
            }
            retire(known);
        }
        synchronized (mapping) {
            if (closed) {
                throw new IllegalStateException("mailbox is closed: entity=" + entity);
            }
            PeerMailbox current = peers.get(toEntity);
            if (current != null) {
                return current;
            }
            PeerMailbox mapped = map(ShmNames.checkEntity(toEntity));
            peers.put(toEntity, mapped);
            return mapped;
        }
    }

    /** As {@link ShmMailbox#isAlive}; a mapping it holds is looked at inside {@code guard}. */
    boolean isAlive(String peer, RingGuard guard) {
        int at = peer.indexOf('@');
        String name = at < 0 ? peer : peer.substring(0, at);
        long incarnation = at < 0 ? 0 : Long.parseUnsignedLong(peer.substring(at + 1), 16);
        if (!guard.tryEnter()) {
            return true; // closing: decide nothing for the transport
        }
        try {
            PeerMailbox known = cached(name);
            if (known != null && (incarnation == 0 || known.incarnation == incarnation)) {
                return known.ownerAlive();
            }
        } finally {
            guard.exit();
        }
        long live = liveIncarnation(name);
        return live != 0 && (incarnation == 0 || live == incarnation);
    }

    /** Waits until {@code peer} runs (its mailbox exists, is held and ready), or the timeout passes. */
    boolean awaitLive(String peer, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (liveIncarnation(peer) == 0) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    /** The cached mapping of the peer, if any (no check). */
    PeerMailbox cached(String peer) {
        return peers.get(peer);
    }

    /** Drops a peer whose owner died; its mapping goes at the next {@link #closeRetired()}. */
    void retire(PeerMailbox peer) {
        if (peers.remove(peer.entity, peer)) {
            peer.sent.retire(); // the last position this sender learns: the mapping goes
            retired.add(peer);
            LOG.info("peer's mailbox owner is gone, dropping its mapping: entity={}, incarnation={}", peer.entity,
                Long.toHexString(peer.incarnation));
        }
    }

    /** Unmaps the retired peers: only when no thread is inside a ring. */
    void closeRetired() {
        for (PeerMailbox p; (p = retired.poll()) != null; ) {
            p.close();
        }
    }

    boolean hasRetired() {
        return !retired.isEmpty();
    }

    /** The incarnation of the live, ready mailbox at the entity's name, or 0. */
    long liveIncarnation(String peer) {
        String path = dir.resolve(ShmNames.mailbox(namespace, peer)).toString();
        int fd;
        try {
            fd = OurFile.open(path, false).fd();
        } catch (NativeCallException | SegmentAccessException e) {
            return 0; // nothing there, or nothing of ours (another user's file or FIFO at the name)
        }
        try {
            return PeerMailbox.probeUnlocked(fd, path) ? 0 : PeerMailbox.readIncarnation(fd, path);
        } finally {
            Posix.close(fd, path);
        }
    }

    /** No peer is mapped from now on; a mapping in progress ends first. */
    void stopMapping() {
        synchronized (mapping) {
            closed = true;
        }
    }

    /** Unmaps every peer: only after {@link #stopMapping()} and when no thread is inside a ring. */
    void closeAll() {
        peers.values().forEach(PeerMailbox::close);
        peers.clear();
        closeRetired();
    }

    private PeerMailbox map(String peer) {
        String name = ShmNames.mailbox(namespace, peer);
        for (int attempt = 0; ; attempt++) {
            MappedSegment peerFile;
            try {
                peerFile = MappedSegment.openPeer(dir, name, MailboxDescriptor.FILE_BYTES, true);
            } catch (SegmentAccessException e) {
                String why = whyNoMailbox(dir.resolve(name).toString(), e);
                if (why == null && attempt < 100) { // its owner is making it: look again
                    sleepMs(5);
                    continue;
                }
                throw unavailable(peer, why != null ? why : STARTING);
            }
            int fd = -1;
            boolean ok = false;
            try {
                long incarnation = peerFile.memory().get(ValueLayout.JAVA_LONG, MailboxDescriptor.INCARNATION_OFFSET);
                fd = OurFile.open(peerFile.path(), true).fd();
                if (incarnation != 0 && PeerMailbox.readIncarnation(fd, peerFile.path()) == incarnation) {
                    if (PeerMailbox.probeUnlocked(fd, peerFile.path())) {
                        throw unavailable(peer, "died and has not come back: nobody owns its mailbox "
                            + peerFile.path() + " (the next sweep removes it)");
                    }
                    int version = peerFile.memory().get(ValueLayout.JAVA_INT, MailboxDescriptor.VERSION_OFFSET);
                    if (version != MailboxDescriptor.VERSION) {
                        throw new PeerRejectedException(peer, "peer unavailable: entity " + peer + " speaks format "
                            + (version == 0 ? 1 : version) + " (its mailbox " + peerFile.path() + "), this process"
                            + " speaks format " + MailboxDescriptor.VERSION + ": run one version of mstar-transport"
                            + " (JVM and Python) in a deployment");
                    }
                    ok = true;
                    return new PeerMailbox(peer, peerFile, incarnation, fd);
                }
            } catch (NativeCallException | SegmentAccessException e) {
                // the file went away (or was replaced) between mapping and probing: look again
            } finally {
                if (!ok) {
                    peerFile.unmap();
                    if (fd >= 0) {
                        Posix.close(fd, peerFile.path());
                    }
                }
            }
            if (attempt == 100) { // 0.5 s
                throw unavailable(peer, STARTING);
            }
            sleepMs(5);
        }
    }

    /**
     * What is at a peer's mailbox name that could not be mapped, in words about a mailbox; null when it is a
     * mailbox of ours not sized yet (its owner is starting).
     */
    private static String whyNoMailbox(String path, SegmentAccessException e) {
        Posix.FileStatus at = Posix.lstat(path);
        if (at == null) {
            return "has no mailbox (" + path + "): it does not run in this deployment (same endpoint, token and"
                + " MSTAR_SHM_DIR?), or its mailbox file was removed while it runs (then only its restart makes it"
                + " reachable again)";
        }
        if ((at.mode() & Posix.S_IFMT) == Posix.S_IFLNK) {
            return "has a symbolic link at its mailbox name, not a mailbox: " + path + " (made by uid " + at.uid()
                + "): remove it";
        }
        if (at.uid() != Posix.geteuid()) {
            return "has another user's file at its mailbox name, not its mailbox: " + path + " (uid " + at.uid()
                + "): remove it (as its owner or root), or give the deployment a directory of its own";
        }
        if (!at.isRegularFile()) {
            return "has something that is not a file at its mailbox name (mode " + Integer.toOctalString(at.mode())
                + "): " + path + ": remove it";
        }
        if (at.sizeBytes() < MailboxDescriptor.FILE_BYTES) {
            return null;
        }
        return "has a mailbox that cannot be opened: " + e.getMessage();
    }

    PeerUnavailableException unavailable(String peer, String what) {
        return new PeerUnavailableException(peer, "peer unavailable: entity " + peer + " " + what + ": namespace="
            + namespace + ", dir=" + dir);
    }

    static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new MstarTransportException("interrupted", e);
        }
    }
}
