package io.mstar.transport.shm;

import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.exceptions.StaleTensorException;
import io.mstar.transport.lifecycle.CloseOnce;
import io.mstar.transport.metrics.TransportCounters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A consumer's cache of peer segments: each is mapped once, on its first tensor, and shared by every
 * view into it. A mapping whose file is gone (its slot's dedicated segment was released, or its
 * producer stopped) is dropped once no view holds it. Every read checks the slot's stamp ({@link SlotStamp})
 * before and after: a slot reused under it is refused ({@link StaleTensorException}), counted in
 * {@code staleReads} and logged at most every 10 s. Thread-safe.
 */
public final class PeerSegments implements AutoCloseable {
    private static final long SWEEP_INTERVAL_NS = 1_000_000_000L;

    private static final Logger LOG = LoggerFactory.getLogger(PeerSegments.class);
    private static final long STALE_WARN_INTERVAL_NS = 10_000_000_000L;

    private final Path dir;
    private final TransportCounters counters; // staleReads
    private final AtomicLong nextStaleWarnNs = new AtomicLong(System.nanoTime());
    private MappingListener listener = MappingListener.NONE;
    private final Map<String, Peer> peers = new HashMap<>();
    private long nextSweepNs = System.nanoTime() + SWEEP_INTERVAL_NS;
    private final CloseOnce closer = new CloseOnce();

    private static final class Peer {
        final MappedSegment segment;
        int readers;
        int handlers; // readers that are a handler's call: its views of the mapping outlive the mapping's own scope
        boolean unmapWhenHandled; // closed while a handler read it: unmapped when the last handler returns

        Peer(MappedSegment segment) {
            this.segment = segment;
        }
    }

    public PeerSegments(Path dir, TransportCounters counters) {
        this.dir = dir;
        this.counters = counters;
    }

    /**
     * A read-only view of a tensor in a peer's segment, holding the mapping until the view is closed; its slot's
     * stamp is checked first, and again by {@link MappedView#checkIntact()}.
     *
     * @throws SegmentAccessException when the segment is gone, fails a check, or does not hold the tensor
     * @throws StaleTensorException   when the slot's stamp names another tensor (it was reused)
     */
    public MappedView open(TensorDescriptor d) {
        long msb = d.uuid().getMostSignificantBits();
        long lsb = d.uuid().getLeastSignificantBits();
        Peer held = hold(d.fileName(), d.offset(), d.nbytes());
        boolean ok = false;
        try {
            MemorySegment segment = held.segment.memory();
            checkStamp(segment, d.fileName(), d.offset(), d.nbytes(), msb, lsb, "before it was read");
            MappedView view = new MappedView(d, segment.asSlice(d.offset(), d.nbytes()), () -> release(held),
                () -> checkStamp(segment, d.fileName(), d.offset(), d.nbytes(), msb, lsb, "while it was held"));
            ok = true;
            return view;
        } finally {
            if (!ok) {
                release(held);
            }
        }
    }

    /**
     * Hands the tensor's bytes in a peer segment to {@code reader} in place, holding the mapping meanwhile;
     * the slot's stamp is checked before and after. Allocates nothing once the segment is mapped.
     *
     * @throws SegmentAccessException when the segment is gone, fails a check, or does not hold the tensor
     * @throws StaleTensorException   when the slot's stamp names another tensor, before or after the read: a
     *                                reader that ran then saw bytes that were not the tensor's
     */
    public void read(String fileName, long offset, long nbytes, long uuidMsb, long uuidLsb,
                     TensorRecords.Reader reader) {
        Peer held = hold(fileName, offset, nbytes);
        handling(held, 1);
        try {
            MemorySegment segment = held.segment.memory();
            checkStamp(segment, fileName, offset, nbytes, uuidMsb, uuidLsb, "before it was read");
            try {
                reader.read(segment, offset, nbytes);
            } catch (InternalError fault) {
                throw shrunk(fileName, offset, nbytes, fault);
            }
            checkStamp(segment, fileName, offset, nbytes, uuidMsb, uuidLsb, "while it was read");
        } finally {
            handling(held, -1);
            release(held);
        }
    }

    // A handler's read begins (+1) or ends (-1). The reader may hand out views in a scope of its own (the handler's
    // call), which the mapping's close does not reach: the mapping stays until the last handler on it returns.
    private synchronized void handling(Peer peer, int delta) {
        peer.handlers += delta;
        if (peer.handlers == 0 && peer.unmapWhenHandled) {
            peer.unmapWhenHandled = false;
            unmap(peer);
        }
    }

    // Throws when the slot no longer holds the tensor: counted, and logged at most every STALE_WARN_INTERVAL_NS.
    private void checkStamp(MemorySegment segment, String fileName, long offset, long nbytes, long msb, long lsb,
                            String when) {
        boolean holds;
        try {
            holds = SlotStamp.holds(segment, offset, nbytes, msb, lsb);
        } catch (InternalError fault) {
            throw shrunk(fileName, offset, nbytes, fault);
        }
        if (holds) {
            return;
        }
        UUID uuid = new UUID(msb, lsb);
        StaleTensorException stale = new StaleTensorException(uuid, "refused a tensor whose slot was reused " + when
            + " (its stamp names another tensor): uuid=" + uuid + ", segment=" + fileName + ", offset=" + offset
            + ", nbytes=" + nbytes);
        long count = counters.staleRead();
        long now = System.nanoTime();
        long next = nextStaleWarnNs.get();
        if (now - next >= 0 && nextStaleWarnNs.compareAndSet(next, now + STALE_WARN_INTERVAL_NS)) {
            LOG.warn("{}; its producer is told (staleReads={}, this warning at most every {} s)", stale.getMessage(),
                count, STALE_WARN_INTERVAL_NS / 1_000_000_000L);
        }
        throw stale;
    }

    /**
     * The stamp lies past the tensor's bytes, so a file shrunk below the tensor faults on the stamp check: the
     * JVM turns that SIGBUS into an {@link InternalError}, which goes up as ours.
     */
    private static SegmentAccessException shrunk(String fileName, long offset, long nbytes, InternalError fault) {
        return new SegmentAccessException("peer segment was shrunk below the tensor (a process of this user"
            + " truncated it): segment=" + fileName + ", offset=" + offset + ", nbytes=" + nbytes, fault);
    }

    // The mapping of the segment, mapped on first use, with one more reader.
    private synchronized Peer hold(String fileName, long offset, long nbytes) {
        if (closer.isClosed()) {
            throw new IllegalStateException("peer segments are closed");
        }
        long now = System.nanoTime();
        if (now - nextSweepNs >= 0) {
            sweep();
            nextSweepNs = now + SWEEP_INTERVAL_NS;
        }
        long end = SlotStamp.at(offset, nbytes) + SlotStamp.STAMP_BYTES; // the tensor and its stamp
        Peer peer = peers.get(fileName);
        if (peer == null) {
            peer = new Peer(MappedSegment.openPeer(dir, fileName, end));
            peers.put(fileName, peer);
            listener.mapped(peer.segment);
        }
        if (end > peer.segment.sizeBytes()) {
            throw new SegmentAccessException("tensor lies outside its segment: segment=" + fileName
                + ", offset=" + offset + ", nbytes=" + nbytes + " (and its " + SlotStamp.STAMP_BYTES + "-byte stamp)"
                + ", segmentBytes=" + peer.segment.sizeBytes());
        }
        peer.readers++;
        return peer;
    }

    private synchronized void release(Peer peer) {
        peer.readers--;
    }

    /** Unmaps segments whose file is gone and that no view holds; returns how many. */
    public synchronized int sweep() {
        int dropped = 0;
        for (Iterator<Map.Entry<String, Peer>> it = peers.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Peer> e = it.next();
            if (e.getValue().readers == 0 && Files.notExists(dir.resolve(e.getKey()), LinkOption.NOFOLLOW_LINKS)) {
                unmap(e.getValue());
                it.remove();
                dropped++;
            }
        }
        return dropped;
    }

    /**
     * Tells {@code listener} of every segment mapped now and later, and before each is unmapped (the CUDA
     * pinning hooks in here, possibly after the first receives).
     */
    public synchronized void mappingListener(MappingListener listener) {
        this.listener = listener;
        peers.values().forEach(p -> listener.mapped(p.segment));
    }

    /** Segments mapped now. */
    public synchronized int mapped() {
        return peers.size();
    }

    /**
     * Unmaps every peer segment; views still open then refuse access. A segment a handler reads now (a handler that
     * closes its endpoint, a close from another thread) is unmapped as that handler returns.
     */
    @Override
    public void close() {
        closer.close(this::unmapAll);
    }

    private synchronized void unmapAll() {
        for (Peer peer : peers.values()) {
            if (peer.handlers > 0) {
                peer.unmapWhenHandled = true;
            } else {
                unmap(peer);
            }
        }
        peers.clear();
    }

    private void unmap(Peer peer) {
        try {
            listener.unmapping(peer.segment);
        } finally {
            peer.segment.unmap();
        }
    }
}
