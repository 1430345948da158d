package io.mstar.transport.remote;

import io.mstar.transport.RemoteConfig;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.exceptions.CapacityException;
import io.mstar.transport.remote.RemoteProtocol.Refusal;
import io.mstar.transport.remote.RemoteProtocol.TensorHeader;
import io.mstar.transport.remote.RemoteProtocol.Violation;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.CompositeByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.util.concurrent.ScheduledFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;

/**
 * One connection another node opened to this process, on the event loop. First the handshake: the peer names
 * an entity the map places at its address and proves it holds the secret ({@link Handshake}); nothing else
 * is read before. Then tensors: each TENSOR header is checked ({@link RemoteProtocol#readTensor}), admitted
 * against the sender's budget ({@link SenderBudget}), given a slot of this node's arena, and its bytes are
 * copied from the socket's buffers straight into the slot, checksummed as they land. A whole tensor goes to
 * the local consumer and its LANDED goes back on this connection. While the budget or the arena says wait,
 * the connection stops reading (TCP's window holds the sender); a tensor whose bytes stop coming for the
 * timeout is aborted and the connection closed; a frame that breaks the protocol closes it.
 *
 * <p>One class on purpose: its states (handshake, header, body, skip), its pauses (budget, arena, replies
 * unread) and its timers share one buffer and one tensor in progress on one event loop; split, each piece
 * would reach into the others' fields.
 */
final class InboundConnection extends ChannelInboundHandlerAdapter {
    /**
     * Test-only seam: {@code -Dmstar.test.noLanded=true} hands tensors over and never confirms their first send (a
     * LANDED lost on the way), so a test can show that the sender then tells them in doubt, never a definite
     * failure; a repost is confirmed.
     */
    static final boolean NO_LANDED = Boolean.getBoolean("mstar.test.noLanded");
    /**
     * Test-only seam: {@code -Dmstar.test.noDuplicateWindow=true} hands a repost over even when its first send
     * landed here, so a test can show that the window is what keeps reposts from reaching a handler twice.
     */
    static final boolean NO_DUPLICATE_WINDOW = Boolean.getBoolean("mstar.test.noDuplicateWindow");

    private enum State { HELLO, PROOF, HEADER, BODY, SKIP }

    private static final Logger LOG = LoggerFactory.getLogger(RemoteLink.class);
    private static final long LARGE = 64 << 10;
    private static final int HELLO_MAX = 1 + 5 + RemoteProtocol.NONCE_BYTES + 1 + 64;

    private final RemoteLink link;
    private final long openedAt = System.nanoTime();
    private ChannelHandlerContext ctx;
    private CompositeByteBuf in;
    private ScheduledFuture<?> checks;
    private boolean inHandshake; // counted by the link among the handshakes
    private State state = State.HELLO;
    private InetAddress address;
    private String peer; // the entity, once it named itself
    private byte[] clientNonce;
    private byte[] serverNonce;
    private SenderBudget budget; // once authenticated
    private DuplicateWindow landedLately; // the sender's, once authenticated
    private boolean paused; // waiting for the budget or the arena; not the peer's doing
    private long pausedSince;
    private TensorHeader header; // the tensor being admitted or landed
    private TensorClaim claim;
    private long base; // the claim's address
    private ByteBuf window; // the rest of the slot, handed to the socket to read into (LandingAllocator)
    private long lastNbytes; // the size of the last tensor: large ones are read header first
    private final CRC32C crc = new CRC32C();
    private long position; // bytes of the tensor landed (or skipped)
    private long lastProgress;
    private long lastHandshakeProgress = openedAt; // for the gate: a handshake that stalls yields its slot
    private long lastActivity = openedAt; // for the gate and the idle timeout
    private boolean backedUp; // the peer does not read our replies: we stop reading its frames
    private final RateLimitedWarnings warnings;

    InboundConnection(RemoteLink link) {
        this.link = link;
        this.warnings = link.warnings();
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.in = ctx.alloc().compositeBuffer(64);
        this.address = ((InetSocketAddress) ctx.channel().remoteAddress()).getAddress();
        inHandshake = link.gate().open(this, address);
        if (!inHandshake) {
            ctx.close();
            return;
        }
        if (ctx.pipeline().first() == this) { // no TLS underneath: the socket may read straight into slots
            ctx.channel().config().setAllocator(new LandingAllocator(ctx.channel().config().getAllocator(), this));
        }
        long period = Math.max(10, Math.min(1000, link.timeoutNs() / 4_000_000));
        checks = ctx.executor().scheduleAtFixedRate(this::check, period, period, TimeUnit.MILLISECONDS);
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        lastActivity = System.nanoTime();
        if (in == null) {
            ((ByteBuf) msg).release();
            return;
        }
        if (msg == window) { // the socket read into the slot itself: the bytes are where they belong
            window = null;
            int n = ((ByteBuf) msg).readableBytes();
            ((ByteBuf) msg).release();
            crc.update(MemorySegment.ofAddress(base + position).reinterpret(n).asByteBuffer());
            position += n;
            lastProgress = System.nanoTime();
            if (position == header.nbytes()) {
                finish();
            }
            return;
        }
        in.addComponent(true, (ByteBuf) msg);
        process();
    }

    /**
     * How much the socket reads next when not into a slot: after a large tensor (where the next is likely
     * large too), a header's worth, so that its bytes are read straight into its slot, not copied there.
     */
    int readSize(int guess) {
        return state == State.HEADER && lastNbytes >= LARGE && in != null && !in.isReadable()
            ? RemoteProtocol.LENGTH_FIELD + RemoteProtocol.MAX_FRAME : guess;
    }

    /**
     * The rest of the landing slot as the buffer the socket reads into next, or null for a buffer of the
     * allocator's: only in the middle of a tensor's bytes with nothing unread before them. On the event loop.
     */
    ByteBuf landingBuffer() {
        if (state != State.BODY || paused || in == null || in.isReadable() || position >= header.nbytes()) {
            return null;
        }
        int n = (int) Math.min(header.nbytes() - position, 1 << 30);
        window = Unpooled.wrappedBuffer(MemorySegment.ofAddress(base + position).reinterpret(n).asByteBuffer()).clear();
        return window;
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        ctx.flush(); // the LANDED frames of this read, together
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.close(); // a reset by a sender that died, mostly: what it had half sent is aborted on close
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        if (checks != null) {
            checks.cancel(false);
        }
        if (claim != null) { // a tensor without a claim holds nothing of the budget (waiting, or refused)
            abort("its connection closed after " + position + " of " + header.nbytes() + " bytes");
        }
        if (budget != null) {
            budget.forget(this);
        }
        if (in != null) {
            in.release();
            in = null;
        }
        link.gate().closed(this, peer);
    }

    private void process() {
        try {
            while (!paused && !backedUp && in != null && in.isReadable() && step()) {
                if (!ctx.channel().isWritable()) { // replies pile up unread: read no more until they drain
                    backedUp = true;
                    ctx.flush();
                    ctx.channel().config().setAutoRead(false);
                }
            }
            if (in != null) {
                in.discardReadComponents();
            }
        } catch (Violation v) {
            link.violation(address, peer, budget != null, v.getMessage());
            if (in != null) {
                in.skipBytes(in.readableBytes());
            }
            ctx.close();
        }
    }

    // One frame or a run of bytes; false when what is readable is not enough.
    private boolean step() {
        switch (state) {
            case HELLO -> {
                int length = RemoteProtocol.frameLength(in, HELLO_MAX);
                if (length < 0 || !RemoteProtocol.whole(in, length)) {
                    return false;
                }
                RemoteProtocol.Greeting hello = RemoteProtocol.readGreeting(in, length, true);
                if (!link.gate().placedAt(hello.entity(), address)) {
                    throw new Violation("entity=" + hello.entity() + " is not placed at " + address.getHostAddress()
                        + " by the map");
                }
                peer = hello.entity();
                lastHandshakeProgress = System.nanoTime();
                clientNonce = hello.nonce();
                serverNonce = Handshake.nonce();
                ByteBuf out = ctx.alloc().buffer(HELLO_MAX);
                RemoteProtocol.writeChallenge(out, serverNonce, link.entityAscii());
                ctx.writeAndFlush(out);
                state = State.PROOF;
            }
            case PROOF -> {
                int length = RemoteProtocol.frameLength(in, 1 + RemoteProtocol.MAC_BYTES);
                if (length < 0 || !RemoteProtocol.whole(in, length)) {
                    return false;
                }
                byte[] proof = RemoteProtocol.readMac(in, length, RemoteProtocol.PROOF);
                Handshake handshake = link.handshake();
                if (!Handshake.matches(handshake.proof(true, clientNonce, serverNonce, peer, link.entity()), proof)) {
                    throw new Violation("its proof does not match: it does not hold this deployment's secret");
                }
                inHandshake = false;
                budget = link.authenticated(this, peer);
                if (budget == null) {
                    throw new Violation("entity=" + peer + " has " + ConnectionGate.MAX_CONNECTIONS_PER_SENDER
                        + " connections open already, none of them idle for a second");
                }
                landedLately = link.windowOf(peer);
                ByteBuf out = ctx.alloc().buffer(RemoteProtocol.LENGTH_FIELD + 1 + RemoteProtocol.MAC_BYTES);
                RemoteProtocol.writeMac(out, RemoteProtocol.WELCOME,
                    handshake.proof(false, clientNonce, serverNonce, peer, link.entity()));
                ctx.writeAndFlush(out);
                state = State.HEADER;
            }
            case HEADER -> {
                int length = RemoteProtocol.frameLength(in, RemoteProtocol.MAX_FRAME);
                if (length < 0 || !RemoteProtocol.whole(in, length)) {
                    return false;
                }
                int type = in.getUnsignedByte(in.readerIndex() + RemoteProtocol.LENGTH_FIELD);
                if (type != RemoteProtocol.TENSOR) {
                    throw new Violation("frame type " + type + " where a TENSOR was due");
                }
                header = RemoteProtocol.readTensor(in, length);
                lastNbytes = header.nbytes();
                position = 0;
                lastProgress = System.nanoTime();
                DuplicateWindow.Match landed = landedBefore(lastProgress);
                if (landed == DuplicateWindow.Match.SAME) {
                    skipDuplicate();
                } else if (landed == DuplicateWindow.Match.DIFFERENT) {
                    refuseImpostor();
                } else {
                    admit();
                }
            }
            case BODY -> land();
            case SKIP -> {
                int n = (int) Math.min(in.readableBytes(), header.nbytes() - position);
                in.skipBytes(n);
                position += n;
                lastProgress = System.nanoTime();
                if (position == header.nbytes()) {
                    header = null;
                    state = State.HEADER;
                }
            }
        }
        return true;
    }

    // The tensor's bytes may come once the sender's budget and the arena have room; until then, no reading.
    private void admit() {
        SenderBudget.Admission admission = budget.take(header.nbytes(), this);
        if (admission == SenderBudget.Admission.WAIT) {
            pause();
            return;
        }
        if (admission == SenderBudget.Admission.TOO_LARGE) { // before a byte of it is committed
            refuse(Refusal.TOO_LARGE, false);
            return;
        }
        try {
            claim = link.claim(header);
        } catch (CapacityException e) { // strict mode, arena full: wait as a local producer would
            long waited = paused ? System.nanoTime() - pausedSince : 0;
            if (waited < link.strictWaitNs()) {
                budget.release(header.nbytes());
                pause();
                ctx.executor().schedule(this::resume, 1, TimeUnit.MILLISECONDS);
                return;
            }
            refuse(Refusal.NO_ROOM, true);
            return;
        } catch (RuntimeException e) {
            warnings.warn("no-room", peer, "no room for a tensor from entity=" + peer + " (" + header.nbytes()
                + " bytes): " + e);
            refuse(Refusal.NO_ROOM, true);
            return;
        }
        paused = false;
        // Never write past the slot or through a heap offset (the header was checked; this is the last line).
        if (!claim.memory().isNative() || claim.memory().byteSize() != header.nbytes()) {
            claim.abort();
            claim = null;
            refuse(Refusal.NO_ROOM, true);
            return;
        }
        base = claim.memory().address();
        crc.reset();
        state = State.BODY;
        if (header.nbytes() == 0) {
            finish();
        }
    }

    private DuplicateWindow.Match landedBefore(long nowNs) {
        return NO_DUPLICATE_WINDOW ? DuplicateWindow.Match.ABSENT
            : landedLately.match(header.firstMsb(), header.firstLsb(), header.nbytes(), header.crc(), nowNs);
    }

    // A repeat whose bytes differ from what landed under its first uuid: not that tensor; refused, never confirmed.
    private void refuseImpostor() {
        warnings.warn("repeat", peer, "tensor from entity=" + peer + " requestId=" + header.requestId() + " refused:"
            + " a tensor of other bytes landed under the uuid it names as its first send");
        refuse(Refusal.NOT_THE_FIRST, false);
    }

    // A repost of an in-doubt tensor that landed here already: confirmed again, its bytes skipped, not handed over.
    private void skipDuplicate() {
        link.counters().duplicates.incrementAndGet();
        confirm();
        skipBody();
    }

    // Before its bytes: they follow all the same and are skipped. `taken`: the budget holds the tensor.
    private void refuse(Refusal reason, boolean taken) {
        paused = false;
        tellRefused(reason, taken);
        skipBody();
    }

    private void skipBody() {
        state = State.SKIP;
        if (header.nbytes() == 0) {
            header = null;
            state = State.HEADER;
        }
    }

    private void confirm() {
        ByteBuf out = ctx.alloc().buffer(RemoteProtocol.LENGTH_FIELD + RemoteProtocol.UUID_FRAME);
        RemoteProtocol.writeLanded(out, header.msb(), header.lsb());
        ctx.write(out); // flushed with the read
    }

    private void tellRefused(Refusal reason, boolean taken) {
        if (taken) {
            budget.release(header.nbytes());
        }
        ByteBuf out = ctx.alloc().buffer(RemoteProtocol.LENGTH_FIELD + RemoteProtocol.UUID_FRAME + 1);
        RemoteProtocol.writeRefused(out, header.msb(), header.lsb(), reason);
        ctx.write(out);
        link.counters().refusedHere.incrementAndGet();
        warnings.warn(reason.name(), peer, "tensor from entity=" + peer + " requestId=" + header.requestId() + " ("
            + header.nbytes() + " bytes) refused: " + reason.text + (reason == Refusal.TOO_LARGE ? " (this node's "
            + RemoteConfig.MAX_INFLIGHT_MB + "=" + (link.maxInFlightBytes() >> 20) + ")" : ""));
    }

    private void land() {
        int n = (int) Math.min(in.readableBytes(), header.nbytes() - position);
        // An address, not the claim's scope: the slot lives until publish or abort, both on this thread.
        ByteBuffer to = MemorySegment.ofAddress(base + position).reinterpret(n).asByteBuffer();
        in.readBytes(to);
        crc.update(to.flip()); // while the bytes are in cache
        position += n;
        lastProgress = System.nanoTime();
        if (position == header.nbytes()) {
            finish();
        }
    }

    private void finish() {
        if ((int) crc.getValue() != header.crc()) {
            claim.abort();
            claim = null;
            link.counters().aborted.incrementAndGet();
            warnings.warn("checksum", peer, "tensor from entity=" + peer + " requestId=" + header.requestId()
                + " refused: its bytes do not match their checksum (changed on the way, or its slot changed under the"
                + " sender's write); counted in remoteAborted");
            tellRefused(Refusal.CORRUPTED, true);
            header = null;
            state = State.HEADER;
            return;
        }
        // Another connection of the sender may have landed the same first send meanwhile: one of them is handed over.
        DuplicateWindow.Match landed = NO_DUPLICATE_WINDOW ? DuplicateWindow.Match.ABSENT
            : landedLately.add(header.firstMsb(), header.firstLsb(), header.nbytes(), header.crc(), System.nanoTime());
        if (landed != DuplicateWindow.Match.ABSENT) {
            claim.abort();
            claim = null;
            if (landed == DuplicateWindow.Match.SAME) {
                budget.release(header.nbytes());
                link.counters().duplicates.incrementAndGet();
                confirm();
            } else {
                tellRefused(Refusal.NOT_THE_FIRST, true);
            }
            header = null;
            state = State.HEADER;
            return;
        }
        TensorDescriptor descriptor = claim.publish();
        claim = null;
        if (!NO_LANDED || header.msb() != header.firstMsb() || header.lsb() != header.firstLsb()) {
            confirm();
        }
        link.landed(peer, budget, header, descriptor);
        header = null;
        state = State.HEADER;
    }

    private void pause() {
        if (!paused) {
            paused = true;
            pausedSince = System.nanoTime();
            ctx.channel().config().setAutoRead(false);
        }
    }

    /** Room may have come: try the waiting tensor again, and read on. On the event loop. */
    void resume() {
        if (!paused || in == null) {
            return;
        }
        admit();
        readOn();
    }

    private void readOn() {
        if (!paused && !backedUp && in != null) {
            ctx.channel().config().setAutoRead(true);
            process();
            ctx.flush();
        }
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (backedUp && ctx.channel().isWritable()) {
            backedUp = false;
            readOn();
        }
        ctx.fireChannelWritabilityChanged();
    }

    /** When the handshake last moved (opened, or its HELLO read). For the gate, on the event loop. */
    long lastHandshakeProgressNs() {
        return lastHandshakeProgress;
    }

    /** Whether its HELLO has been read. For the gate, on the event loop. */
    boolean namedItself() {
        return peer != null;
    }

    /** When a byte last came. For the gate, on the event loop. */
    long lastActivityNs() {
        return lastActivity;
    }

    /** Authenticated and between tensors, with nothing unread: closing it loses nothing. On the event loop. */
    boolean isIdle() {
        return budget != null && state == State.HEADER && claim == null && !paused && (in == null || !in.isReadable());
    }

    /** The gate gives this connection's place to another: closed, counted and logged like a refusal. */
    void evict(String why) {
        link.gate().refuse(address, peer, "evicted", why);
        ctx.close();
    }

    /** As {@link #resume}, from any thread. */
    void resumeLater() {
        if (ctx != null) {
            ctx.executor().execute(this::resume);
        }
    }

    // Timers: a handshake that does not finish, bytes that stop in the middle of a tensor.
    private void check() {
        long now = System.nanoTime();
        if (budget == null && now - openedAt > link.handshakeTimeoutNs()) {
            link.violation(address, peer, false, "no handshake within " + link.handshakeTimeoutNs() / 1_000_000 + " ms");
            ctx.close();
        } else if (isIdle() && now - lastActivity > link.idleTimeoutNs()) {
            LOG.debug("closing a cross-node connection idle for {} s: entity={}", link.idleTimeoutNs() / 1_000_000_000L,
                peer); // the sender opens a new one when it next sends
            ctx.close();
        } else if ((state == State.BODY || state == State.SKIP) && !paused && now - lastProgress > link.timeoutNs()) {
            link.violation(address, peer, true, "a tensor's bytes stopped after " + position + " of "
                + header.nbytes() + " for the timeout");
            ctx.close(); // channelInactive aborts the claim
        }
    }

    private void abort(String why) {
        claim.abort();
        claim = null;
        budget.release(header.nbytes());
        link.counters().aborted.incrementAndGet();
        warnings.warn("aborted", peer, "tensor from entity=" + peer + " requestId=" + header.requestId()
            + " aborted, not delivered: " + why);
        header = null;
    }
}
