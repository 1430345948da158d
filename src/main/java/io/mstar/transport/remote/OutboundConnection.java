package io.mstar.transport.remote;

import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.remote.RemoteProtocol.Violation;
import io.mstar.transport.shm.MappedView;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * This process's connection to one entity on another node. It proves itself and checks the other side's proof
 * ({@link Handshake}) before any tensor goes; then each tensor is a TENSOR header and the bytes of its slot,
 * written by the socket straight from the mapped slot (no copy here), and the LANDED and REFUSED frames that
 * come back are handed to the link. Sending threads wait while the connection's queue is over its high
 * water mark (the receiver's TCP window is full), up to the timeout.
 */
final class OutboundConnection extends ChannelInboundHandlerAdapter {
    private enum State { CHALLENGE, WELCOME, READY }

    /** Larger tensors are written (and checksummed) as several buffers: a ByteBuffer holds at most 2 GiB. */
    private static final long PIECE = 1L << 30;
    /**
     * A sender waits while this much is handed over to the event loop and not yet queued. Shallow, as TCP's own
     * buffer is: a deeper queue moved no more and only made each tensor wait longer (at 1 MiB, p50 10 ms with 4 MiB
     * here and in Netty's buffer, 1 ms with 512 KiB and 1 MiB; benchmarks.md).
     */
    private static final long HANDOVER_MAX = 512 << 10;
    /** A sender waiting for the hand-over is woken when it falls below this: not once per tensor written. */
    private static final long HANDOVER_LOW = HANDOVER_MAX / 2;

    final String entity;
    private final RemoteLink link;
    private final CompletableFuture<Void> ready = new CompletableFuture<>();
    private final byte[] nonce = Handshake.nonce();
    private byte[] serverNonce;
    private final Object writable = new Object();
    /** Bytes handed to the event loop and not yet in the connection's queue: they count against it too. */
    private final AtomicLong handedOver = new AtomicLong();
    private volatile Channel channel;
    private CompositeByteBuf in;
    private State state = State.CHALLENGE;

    OutboundConnection(RemoteLink link, String entity) {
        this.link = link;
        this.entity = entity;
    }

    /** The connection could not be made. */
    void failed(Throwable cause) {
        ready.completeExceptionally(cause);
    }

    /** Waits until the handshake is done; false when it failed or the deadline passed ({@link #whyNotReady}). */
    boolean awaitReady(long deadlineNs) throws InterruptedException {
        try {
            ready.get(Math.max(0, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS);
            return true;
        } catch (ExecutionException | TimeoutException e) {
            return false;
        }
    }

    /** Why the connection is not ready, for errors. */
    String whyNotReady() {
        if (!ready.isDone()) {
            return "no handshake within the timeout";
        }
        try {
            ready.join();
            return "ready";
        } catch (RuntimeException e) {
            Throwable cause = e.getCause() == null ? e : e.getCause();
            String message = cause.getMessage();
            if (message != null && message.startsWith("null: ")) { // Netty's address after a message-less error
                message = message.substring("null: ".length());
            }
            return message == null ? cause.getClass().getSimpleName() // never "null"
                : cause.getClass().getSimpleName() + ": " + message;
        }
    }

    /** The other side accepted the connection and closed it before the handshake was done. */
    boolean closedInHandshake() {
        return channel != null && ready.isCompletedExceptionally() && state != State.READY;
    }

    boolean isClosed() {
        Channel c = channel;
        return ready.isCompletedExceptionally() || (c != null && !c.isActive() && ready.isDone());
    }

    /** Closes the connection: writes still queued fail and let go of their slots. */
    void close() {
        Channel c = channel;
        if (c != null) {
            c.close();
        }
    }

    /**
     * Closes the connection at once: as {@link #close}, and the bytes the kernel still holds for the peer are
     * dropped (SO_LINGER 0: a reset, not a FIN after them), so nothing of it reaches the peer later.
     */
    void abort() {
        Channel c = channel;
        if (c != null) {
            try {
                c.eventLoop().execute(() -> {
                    if (c.isOpen()) {
                        c.config().setOption(ChannelOption.SO_LINGER, 0);
                    }
                    c.close();
                });
            } catch (RejectedExecutionException closing) { // the event loop ended: the link is closing
                c.close();
            }
        }
    }

    boolean isReady() {
        Channel c = channel;
        return ready.isDone() && !ready.isCompletedExceptionally() && c != null && c.isActive();
    }

    /**
     * Writes one tensor: its header and its bytes, read in place from {@code view}, which is closed once
     * the socket took them; {@code bytes} learns whether they were handed to the socket, and whether the
     * socket failed before it took them all. {@code first}: the uuid the tensor was first sent under, when it
     * repeats an in-doubt one, else null.
     *
     * @throws PeerUnavailableException when the connection's queue stays full for the timeout
     */
    void write(TensorDescriptor d, UUID first, ReceivedTensor view, PendingTensors.Bytes bytes, long deadlineNs)
        throws InterruptedException {
        Channel c = channel;
        awaitWritable(c, deadlineNs);
        if (!bytes.hand()) {
            throw new PeerUnavailableException(entity, "entity=" + entity + " took no data for the timeout; the tensor"
                + " was given up before any of it was written");
        }
        handedOver.addAndGet(d.nbytes());
        // The checksum and the header are made on the event loop, which writes the bytes anyway: the sending
        // thread goes back to its work (on a busy node, the core it frees is what the copy needs).
        try {
            c.eventLoop().execute(() -> {
                writeNow(c, d, first == null ? d.uuid() : first, view, bytes);
                long left = handedOver.addAndGet(-d.nbytes());
                if (left < HANDOVER_LOW && left + d.nbytes() >= HANDOVER_LOW) { // a waiting sender posts a few at once
                    synchronized (writable) {
                        writable.notifyAll();
                    }
                }
            });
        } catch (RejectedExecutionException e) { // the event loop ended: the link is closing
            view.close();
            throw new IllegalStateException("the cross-node path is closed: entity=" + entity, e);
        }
    }

    private void writeNow(Channel c, TensorDescriptor d, UUID first, ReceivedTensor view, PendingTensors.Bytes bytes) {
        MemorySegment data = view.data();
        CompositeByteBuf message = c.alloc().compositeDirectBuffer(2 + (int) (d.nbytes() / PIECE));
        CRC32C crc = new CRC32C();
        for (long at = 0; at < d.nbytes(); at += PIECE) {
            long n = Math.min(PIECE, d.nbytes() - at);
            ByteBuffer piece = data.isNative()
                // An address, not the view's scope: this thread did not open the view, which stays open.
                ? MemorySegment.ofAddress(data.address() + at).reinterpret(n).asByteBuffer()
                : ByteBuffer.wrap(data.asSlice(at, n).toArray(ValueLayout.JAVA_BYTE));
            crc.update(piece.duplicate());
            message.addComponent(true, Unpooled.wrappedBuffer(piece));
        }
        // A slot reused before its checksum was taken is not sent; one reused later fails the receiver's check.
        if (view instanceof MappedView mapped && !mapped.intact()) {
            message.release();
            view.close();
            link.staleHere(entity, d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits());
            return;
        }
        ByteBuf header = c.alloc().buffer(RemoteProtocol.MAX_FRAME + RemoteProtocol.LENGTH_FIELD);
        RemoteProtocol.writeTensor(header, d.uuid().getMostSignificantBits(), d.uuid().getLeastSignificantBits(),
            first.getMostSignificantBits(), first.getLeastSignificantBits(), d.nbytes(), (int) crc.getValue(), d.dtype(), d.shape(), d.requestId().getBytes(StandardCharsets.UTF_8));
        message.addComponent(true, 0, header);
        c.writeAndFlush(message).addListener(f -> {
            view.close();
            if (!f.isSuccess()) {
                bytes.writeFailed();
            }
        });
    }

    private void awaitWritable(Channel c, long deadlineNs) throws InterruptedException {
        synchronized (writable) {
            while ((!c.isWritable() || handedOver.get() >= HANDOVER_MAX) && c.isActive()) {
                long left = deadlineNs - System.nanoTime();
                if (left <= 0) {
                    throw new PeerUnavailableException(entity, "entity=" + entity + " took no data for the timeout"
                        + " (its connection stayed full: it does not keep up, or the network is down)");
                }
                TimeUnit.NANOSECONDS.timedWait(writable, Math.min(left, 10_000_000L));
            }
        }
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        channel = ctx.channel();
        in = ctx.alloc().compositeBuffer(64);
        ByteBuf hello = ctx.alloc().buffer(128);
        RemoteProtocol.writeHello(hello, nonce, link.entityAscii());
        ctx.writeAndFlush(hello);
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (in == null) {
            ((ByteBuf) msg).release();
            return;
        }
        in.addComponent(true, (ByteBuf) msg);
        try {
            while (in.isReadable() && step(ctx)) {
                // one frame each
            }
            in.discardReadComponents();
        } catch (Violation v) {
            link.violation(null, entity, ready.isDone(), v.getMessage());
            ready.completeExceptionally(new IllegalStateException("entity=" + entity + " broke the protocol: "
                + v.getMessage()));
            in.skipBytes(in.readableBytes());
            ctx.close();
        }
    }

    private boolean step(ChannelHandlerContext ctx) {
        int length = RemoteProtocol.frameLength(in, state == State.READY ? RemoteProtocol.UUID_FRAME + 1
            : 1 + RemoteProtocol.NONCE_BYTES + 1 + 64);
        if (length < 0 || !RemoteProtocol.whole(in, length)) {
            return false;
        }
        switch (state) {
            case CHALLENGE -> {
                RemoteProtocol.Greeting challenge = RemoteProtocol.readGreeting(in, length, false);
                if (!challenge.entity().equals(entity)) {
                    throw new Violation("entity=" + challenge.entity() + " answered where entity=" + entity
                        + " was expected: check " + RemoteConfig.ENTITIES);
                }
                Handshake handshake = link.handshake();
                this.serverNonce = challenge.nonce();
                ByteBuf proof = ctx.alloc().buffer(RemoteProtocol.LENGTH_FIELD + 1 + RemoteProtocol.MAC_BYTES);
                RemoteProtocol.writeMac(proof, RemoteProtocol.PROOF,
                    handshake.proof(true, nonce, serverNonce, link.entity(), entity));
                ctx.writeAndFlush(proof);
                state = State.WELCOME;
            }
            case WELCOME -> {
                byte[] mac = RemoteProtocol.readMac(in, length, RemoteProtocol.WELCOME);
                if (!Handshake.matches(link.handshake().proof(false, nonce, serverNonce, link.entity(), entity), mac)) {
                    throw new Violation("its proof does not match: it does not hold this deployment's secret");
                }
                state = State.READY;
                ready.complete(null);
            }
            case READY -> {
                int type = in.getUnsignedByte(in.readerIndex() + RemoteProtocol.LENGTH_FIELD);
                boolean landed = type == RemoteProtocol.LANDED && length == RemoteProtocol.UUID_FRAME;
                if (!landed && !(type == RemoteProtocol.REFUSED && length == RemoteProtocol.UUID_FRAME + 1)) {
                    throw new Violation("frame type " + type + " of " + length + " bytes where LANDED or REFUSED was due");
                }
                in.skipBytes(RemoteProtocol.LENGTH_FIELD + 1);
                long msb = in.readLongLE();
                long lsb = in.readLongLE();
                if (landed) {
                    link.confirmed(entity, msb, lsb);
                } else {
                    RemoteProtocol.Refusal reason = RemoteProtocol.Refusal.of(in.readUnsignedByte());
                    if (reason == null) {
                        throw new Violation("an unknown refusal reason");
                    }
                    link.refusedThere(entity, msb, lsb, reason);
                }
            }
        }
        return true;
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        synchronized (writable) {
            writable.notifyAll();
        }
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ready.completeExceptionally(cause);
        ctx.close();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        ready.completeExceptionally(new IllegalStateException(state == State.WELCOME
            ? "entity=" + entity + " refused this node's proof: it holds another secret (check "
                + RemoteConfig.SECRET_FILE + " or " + RemoteConfig.SECRET + " on both nodes), or its entity's"
                + " connections are all in use"
            : "entity=" + entity + " closed the connection before its challenge: its " + RemoteConfig.ENTITIES
                + " does not place entity=" + link.entity() + " at this node's address, one of the two runs TLS"
                + " (MSTAR_REMOTE_TLS_*) and the other does not, or its handshake table is full"));
        synchronized (writable) {
            writable.notifyAll();
        }
        if (in != null) {
            in.release();
            in = null;
        }
    }
}
