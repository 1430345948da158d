package io.mstar.transport.shm;

import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.exceptions.SegmentAccessException;
import io.mstar.transport.lifecycle.CloseOnce;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * A consumer's cache of peer segments: each is mapped once, on its first tensor, and shared by every
 * view into it. A mapping whose file is gone (its slot's dedicated segment was released, or its
 * producer stopped) is dropped once no view holds it. Thread-safe.
 */
public final class PeerSegments implements AutoCloseable {
    private static final long SWEEP_INTERVAL_NS = 1_000_000_000L;

    private final Path dir;
    private MappingListener listener = MappingListener.NONE;
    private final Map<String, Peer> peers = new HashMap<>();
    private long nextSweepNs = System.nanoTime() + SWEEP_INTERVAL_NS;
    private final CloseOnce closer = new CloseOnce();

    private static final class Peer {
        final MappedSegment segment;
        int readers;

        Peer(MappedSegment segment) {
            this.segment = segment;
        }
    }

    public PeerSegments(Path dir) {
        this.dir = dir;
    }

    /**
     * A read-only view of a tensor in a peer's segment, holding the mapping until the view is closed.
     *
     * @throws SegmentAccessException when the segment is gone, fails a check, or does not hold the tensor
     */
    public MappedView open(TensorDescriptor d) {
        Peer held = hold(d.fileName(), d.offset(), d.nbytes());
        return new MappedView(d, held.segment.memory().asSlice(d.offset(), d.nbytes()), () -> release(held));
    }

    /**
     * Hands the tensor's bytes in a peer segment to {@code reader} in place, holding the mapping meanwhile;
     * allocates nothing once the segment is mapped.
     *
     * @throws SegmentAccessException when the segment is gone, fails a check, or does not hold the tensor
     */
    public void read(String fileName, long offset, long nbytes, TensorRecords.Reader reader) {
        Peer held = hold(fileName, offset, nbytes);
        try {
            reader.read(held.segment.memory(), offset, nbytes);
        } finally {
            release(held);
        }
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
        long end = offset + nbytes;
        Peer peer = peers.get(fileName);
        if (peer == null) {
            peer = new Peer(MappedSegment.openPeer(dir, fileName, end));
            peers.put(fileName, peer);
            listener.mapped(peer.segment);
        }
        if (end > peer.segment.sizeBytes()) {
            throw new SegmentAccessException("tensor lies outside its segment: segment=" + fileName
                + ", offset=" + offset + ", nbytes=" + nbytes + ", segmentBytes=" + peer.segment.sizeBytes());
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

    /** Unmaps every peer segment; views still open then refuse access. */
    @Override
    public void close() {
        closer.close(this::unmapAll);
    }

    private synchronized void unmapAll() {
        peers.values().forEach(this::unmap);
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
