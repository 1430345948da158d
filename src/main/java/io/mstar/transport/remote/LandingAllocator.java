package io.mstar.transport.remote;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

/**
 * The allocator of one connection without TLS: while the connection is in the middle of a tensor's bytes
 * and holds nothing unread, the buffer the socket reads into is the rest of the tensor's landing slot
 * itself ({@link InboundConnection#landingBuffer}), so the kernel copies the bytes straight into the arena
 * and nothing copies them again. Between large tensors the socket reads a header's worth at a time
 * ({@link InboundConnection#readSize}), so that the next tensor's bytes land in its slot too. Every other
 * buffer comes from the channel's own allocator.
 */
final class LandingAllocator extends AbstractByteBufAllocator {
    private final ByteBufAllocator delegate;
    private final InboundConnection connection;

    LandingAllocator(ByteBufAllocator delegate, InboundConnection connection) {
        super(true);
        this.delegate = delegate;
        this.connection = connection;
    }

    @Override
    public ByteBuf ioBuffer() {
        return ioBuffer(256);
    }

    @Override
    public ByteBuf ioBuffer(int initialCapacity) {
        return ioBuffer(initialCapacity, Integer.MAX_VALUE);
    }

    @Override
    public ByteBuf ioBuffer(int initialCapacity, int maxCapacity) {
        ByteBuf slot = connection.landingBuffer();
        return slot != null ? slot : delegate.ioBuffer(connection.readSize(initialCapacity), maxCapacity);
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return delegate.heapBuffer(initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        return delegate.directBuffer(initialCapacity, maxCapacity);
    }

    @Override
    public boolean isDirectBufferPooled() {
        return delegate.isDirectBufferPooled();
    }
}
