package io.mstar.transport.remote;

import io.aeron.logbuffer.FragmentHandler;
import io.aeron.logbuffer.FrameDescriptor;
import io.aeron.logbuffer.Header;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import org.agrona.DirectBuffer;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Arrays;
import java.util.function.IntPredicate;
import java.util.zip.CRC32C;

/**
 * The receiving side of the cross-node path, on the link's thread: each sender's tensors arrive in order on
 * one Aeron image; a START claims a slot of this node's arena, DATA fragments are copied straight into it at
 * their offset (no reassembly buffer), and an END whose length and CRC32C match publishes it and hands it to
 * the local consumer. Anything else (a tensor cut off by a new START, a gap, a wrong length or checksum, its
 * sender's image gone) aborts the claim: a torn tensor is never delivered.
 */
final class TensorLanding implements FragmentHandler, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(TensorLanding.class);

    /** Where the link takes what lands. */
    interface Events {
        /** A whole tensor from {@code from}, published in this node's arena. */
        void landed(RemoteProtocol.Start start, TensorDescriptor descriptor);

        /** {@code consumer} confirmed a tensor this process sent. */
        void confirmed(String consumer, long msb, long lsb);
    }

    private final TensorTransport arena;
    private final String entity;
    private final Events events;
    private final RemoteCounters counters;
    private final Int2ObjectHashMap<Landing> bySession = new Int2ObjectHashMap<>();
    private final UnsafeBuffer target = new UnsafeBuffer(0, 0);

    TensorLanding(TensorTransport arena, String entity, Events events, RemoteCounters counters) {
        this.arena = arena;
        this.entity = entity;
        this.events = events;
        this.counters = counters;
    }

    /** One tensor on its way in. */
    private static final class Landing {
        final RemoteProtocol.Start start;
        final TensorClaim claim;
        final long address;
        final CRC32C crc = new CRC32C();
        long position;
        long chunkStart;
        boolean inData;

        Landing(RemoteProtocol.Start start, TensorClaim claim) {
            this.start = start;
            this.claim = claim;
            this.address = claim.memory().address();
        }
    }

    @Override
    public void onFragment(DirectBuffer buffer, int offset, int length, Header header) {
        int session = header.sessionId();
        Landing landing = bySession.get(session);
        boolean last = (header.flags() & FrameDescriptor.END_FRAG_FLAG) != 0;
        if ((header.flags() & FrameDescriptor.BEGIN_FRAG_FLAG) == 0) { // more of a DATA message's payload
            if (landing != null && landing.inData) {
                copy(session, landing, buffer, offset, length, last);
            }
            return;
        }
        switch (RemoteProtocol.type(buffer, offset)) {
            case RemoteProtocol.START -> {
                if (landing != null) {
                    abort(session, landing, "a new tensor started before this one ended");
                }
                begin(session, buffer, offset, length);
            }
            case RemoteProtocol.DATA -> {
                if (landing == null) {
                    return; // the rest of a tensor whose start this process did not see (it joined late)
                }
                long at = buffer.getLong(offset + RemoteProtocol.DATA_OFFSET, RemoteProtocol.ORDER);
                if (!isSameTensor(landing, buffer, offset) || at != landing.position) {
                    abort(session, landing, "a chunk at offset " + at + " where " + landing.position + " was due");
                    return;
                }
                landing.inData = true;
                landing.chunkStart = landing.position;
                copy(session, landing, buffer, offset + RemoteProtocol.DATA_HEADER,
                    length - RemoteProtocol.DATA_HEADER, last);
            }
            case RemoteProtocol.END -> {
                if (landing != null) {
                    finish(session, landing, buffer, offset);
                }
            }
            case RemoteProtocol.LANDED -> events.confirmed(RemoteProtocol.landedConsumer(buffer, offset),
                RemoteProtocol.msb(buffer, offset), RemoteProtocol.lsb(buffer, offset));
            default -> LOG.warn("unknown cross-node message type {} ({} bytes): ignored", RemoteProtocol.type(buffer,
                offset), length);
        }
    }

    private void begin(int session, DirectBuffer buffer, int offset, int length) {
        RemoteProtocol.Start start;
        try {
            start = RemoteProtocol.readStart(buffer, offset, length);
        } catch (RuntimeException e) {
            counters.aborted.incrementAndGet();
            LOG.warn("cross-node tensor refused: {}", e.toString());
            return;
        }
        if (!start.to().equals(entity)) {
            counters.misrouted.incrementAndGet();
            LOG.warn("cross-node tensor for entity={} arrived at entity={}: dropped; check {} on node of from={}",
                start.to(), entity, RemoteConfig.ENTITIES, start.from());
            return;
        }
        TensorClaim claim;
        try {
            claim = arena.claim(start.requestId(), start.dtype(), start.shape());
        } catch (RuntimeException e) {
            counters.aborted.incrementAndGet();
            LOG.warn("no room for a cross-node tensor from={} ({} bytes): {}", start.from(), start.nbytes(), e.toString());
            return;
        }
        if (claim.memory().byteSize() != start.nbytes()) {
            claim.abort();
            counters.aborted.incrementAndGet();
            LOG.warn("cross-node tensor from={} declares {} bytes for dtype {} and shape {}: refused", start.from(),
                start.nbytes(), start.dtype(), Arrays.toString(start.shape()));
            return;
        }
        bySession.put(session, new Landing(start, claim));
    }

    private void copy(int session, Landing landing, DirectBuffer buffer, int offset, int length, boolean last) {
        if (landing.position + length > landing.start.nbytes()) {
            abort(session, landing, "more bytes than the tensor's " + landing.start.nbytes());
            return;
        }
        target.wrap(landing.address + landing.position, length);
        buffer.getBytes(offset, target, 0, length);
        landing.position += length;
        if (last) { // the chunk is whole: checksum it while it is in cache
            landing.inData = false;
            landing.crc.update(landing.claim.memory().asSlice(landing.chunkStart, landing.position - landing.chunkStart)
                .asByteBuffer());
        }
    }

    private void finish(int session, Landing landing, DirectBuffer buffer, int offset) {
        long nbytes = buffer.getLong(offset + RemoteProtocol.NBYTES, RemoteProtocol.ORDER);
        int crc = buffer.getInt(offset + RemoteProtocol.END_CRC, RemoteProtocol.ORDER);
        if (!isSameTensor(landing, buffer, offset) || nbytes != landing.position || landing.inData) {
            abort(session, landing, "it ended after " + landing.position + " of " + landing.start.nbytes() + " bytes");
            return;
        }
        if ((int) landing.crc.getValue() != crc) {
            abort(session, landing, "its CRC32C does not match the sender's");
            return;
        }
        bySession.remove(session);
        TensorDescriptor descriptor = landing.claim.publish();
        counters.tensorsReceived.incrementAndGet();
        counters.bytesReceived.addAndGet(nbytes);
        events.landed(landing.start, descriptor);
    }

    private static boolean isSameTensor(Landing landing, DirectBuffer buffer, int offset) {
        return RemoteProtocol.msb(buffer, offset) == landing.start.msb()
            && RemoteProtocol.lsb(buffer, offset) == landing.start.lsb();
    }

    private void abort(int session, Landing landing, String why) {
        bySession.remove(session);
        landing.claim.abort();
        counters.aborted.incrementAndGet();
        LOG.warn("cross-node tensor from={} requestId={} aborted, not delivered: {}", landing.start.from(),
            landing.start.requestId(), why);
    }

    /** Aborts the tensors whose sender's image is gone (it died or became unreachable mid-tensor). */
    void abortOrphans(IntPredicate hasImage) {
        bySession.entrySet().removeIf(e -> {
            if (hasImage.test(e.getKey())) {
                return false;
            }
            Landing landing = e.getValue();
            landing.claim.abort();
            counters.aborted.incrementAndGet();
            LOG.warn("cross-node tensor from={} requestId={} aborted, not delivered: its sender went away after {}"
                + " of {} bytes", landing.start.from(), landing.start.requestId(), landing.position, landing.start.nbytes());
            return true;
        });
    }

    @Override
    public void close() {
        bySession.values().forEach(l -> l.claim.abort());
        bySession.clear();
    }
}
