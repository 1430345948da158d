package io.mstar.transport.remote;

import io.aeron.Aeron;
import io.aeron.Publication;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.exceptions.MstarTransportException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.zip.CRC32C;

/**
 * The sending side of the cross-node path: one Aeron publication per remote entity, and a tensor's START,
 * DATA chunks (up to Aeron's largest message, read in place from the tensor's slot) and END with its
 * CRC32C, offered in order while back pressure lasts no longer than the timeout.
 */
final class TensorSender {
    /** Aeron's term length for tensor streams: messages (chunks) up to an eighth of it, 2 MiB. */
    static final String DATA_TERM = "16m";

    /** The publication to one remote entity; one tensor at a time on it (its chunks must not interleave). */
    static final class Peer {
        final String entity;
        final String endpoint;
        final Publication publication;
        final UnsafeBuffer header = new UnsafeBuffer(ByteBuffer.allocateDirect(4096));
        final UnsafeBuffer payload = new UnsafeBuffer(0, 0);

        Peer(String entity, String endpoint, Publication publication) {
            this.entity = entity;
            this.endpoint = endpoint;
            this.publication = publication;
        }
    }

    private final RemoteConfig config;
    private final String entity;
    private final Aeron aeron;
    private final TensorTransport reader; // opens our own tensors in place
    private final BooleanSupplier closed;
    private final Map<String, Peer> peers = new ConcurrentHashMap<>();

    TensorSender(RemoteConfig config, String entity, Aeron aeron, TensorTransport reader, BooleanSupplier closed) {
        this.config = config;
        this.entity = entity;
        this.aeron = aeron;
        this.reader = reader;
        this.closed = closed;
    }

    /** The publication to {@code to}, made on first use. */
    Peer peer(String to) {
        String endpoint = config.endpointOf(to);
        if (endpoint == null || !config.isRemote(to)) {
            throw new IllegalArgumentException("entity=" + to + " is not on another node in " + RemoteConfig.ENTITIES);
        }
        return peers.computeIfAbsent(to, e -> new Peer(e, endpoint, aeron.addPublication("aeron:udp?endpoint="
            + endpoint + "|mtu=" + config.mtu() + "|term-length=" + DATA_TERM + "|so-sndbuf=" + AeronNode.SNDBUF,
            RemoteLink.streamOf(e))));
    }

    /** Sends one tensor to {@code peer}; the caller holds the peer's lock. */
    void send(Peer peer, TensorDescriptor d) {
        long msb = d.uuid().getMostSignificantBits();
        long lsb = d.uuid().getLeastSignificantBits();
        try (ReceivedTensor view = reader.receive(d); Arena copy = Arena.ofConfined()) {
            MemorySegment data = view.data();
            if (!data.isNative()) { // a small spilled tensor read as a heap copy
                data = copy.allocate(data.byteSize()).copyFrom(data);
            }
            int length = RemoteProtocol.writeStart(peer.header, msb, lsb, d.nbytes(), d.dtype(), d.shape(),
                entity, peer.entity, d.requestId(), config.listen());
            offer(peer, peer.header, length, null, 0);
            CRC32C crc = new CRC32C();
            long chunk = peer.publication.maxMessageLength() - RemoteProtocol.DATA_HEADER;
            for (long at = 0; at < d.nbytes(); at += chunk) {
                int n = (int) Math.min(chunk, d.nbytes() - at);
                crc.update(data.asSlice(at, n).asByteBuffer());
                RemoteProtocol.writeDataHeader(peer.header, msb, lsb, at);
                peer.payload.wrap(data.address() + at, n);
                offer(peer, peer.header, RemoteProtocol.DATA_HEADER, peer.payload, n);
            }
            RemoteProtocol.writeEnd(peer.header, msb, lsb, d.nbytes(), (int) crc.getValue());
            offer(peer, peer.header, RemoteProtocol.END_LENGTH, null, 0);
        }
    }

    // Offers one message, waiting out back pressure (the receiver's window, its full arena) up to the timeout.
    private void offer(Peer peer, DirectBuffer header, int headerLength, DirectBuffer payload, int payloadLength) {
        IdleStrategy idle = null;
        long start = 0;
        while (true) {
            long result = payload == null ? peer.publication.offer(header, 0, headerLength)
                : peer.publication.offer(header, 0, headerLength, payload, 0, payloadLength);
            if (result > 0) {
                return;
            }
            if (result == Publication.CLOSED || result == Publication.MAX_POSITION_EXCEEDED) {
                throw new MstarTransportException("the publication to entity=" + peer.entity + " at " + peer.endpoint
                    + " is closed (" + (result == Publication.CLOSED ? "closed" : "max position exceeded") + ")");
            }
            if (closed.getAsBoolean()) {
                throw new IllegalStateException("the cross-node path is closed: entity=" + entity);
            }
            if (idle == null) {
                idle = new BackoffIdleStrategy(16, 8, 1_000, 100_000);
                start = System.nanoTime();
            } else if (System.nanoTime() - start > config.timeout().toNanos()) {
                throw new PeerUnavailableException(peer.entity, "entity=" + peer.entity + " at " + peer.endpoint
                    + " took no data for " + config.timeout().toMillis() / 1e3 + " s ("
                    + (result == Publication.NOT_CONNECTED ? "no receiver connected: is it running and reachable?"
                    : "back-pressured: it does not keep up") + ", " + RemoteConfig.TIMEOUT_S + ")");
            }
            idle.idle();
        }
    }

    /** Waits until a receiver of {@code to} is connected, or the timeout passes. */
    boolean awaitConnected(String to, Duration timeout) throws InterruptedException {
        Peer peer = peer(to);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!peer.publication.isConnected()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }
}
