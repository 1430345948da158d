package io.mstar.transport.remote;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.CompositeByteBuf;

/**
 * The allocator of one connection without TLS: while the connection is in the middle of a tensor's bytes
 * and holds nothing unread, the buffer the socket reads into is the rest of the tensor's landing slot
 * itself ({@link InboundConnection#landingBuffer}), so the kernel copies the bytes straight into the arena
 * and nothing copies them again. Between large tensors the socket reads a header's worth at a time
 * ({@link InboundConnection#readSize}), so that the next tensor's bytes land in its slot too. Every other
 * buffer comes from the channel's own allocator.
 */
final class LandingAllocator implements ByteBufAllocator {
    private final ByteBufAllocator delegate;
    private final InboundConnection connection;

    LandingAllocator(ByteBufAllocator delegate, InboundConnection connection) {
        this.delegate = delegate;
        this.connection = connection;
    }

    @Override
    public ByteBuf buffer() {
        return delegate.buffer();
    }

    @Override
    public ByteBuf buffer(int initialCapacity) {
        return delegate.buffer(initialCapacity);
    }

    @Override
    public ByteBuf buffer(int initialCapacity, int maxCapacity) {
        return delegate.buffer(initialCapacity, maxCapacity);
    }

    @Override
    public ByteBuf ioBuffer() {
        return ioBuffer(256);
    }

    @Override
    public ByteBuf ioBuffer(int initialCapacity) {
        ByteBuf slot = connection.landingBuffer();
        return slot != null ? slot : delegate.ioBuffer(connection.readSize(initialCapacity));
    }

    @Override
    public ByteBuf ioBuffer(int initialCapacity, int maxCapacity) {
        ByteBuf slot = connection.landingBuffer();
        return slot != null ? slot : delegate.ioBuffer(connection.readSize(initialCapacity), maxCapacity);
    }

    @Override
    public ByteBuf heapBuffer() {
        return delegate.heapBuffer();
    }

    @Override
    public ByteBuf heapBuffer(int initialCapacity) {
        return delegate.heapBuffer(initialCapacity);
    }

    @Override
    public ByteBuf heapBuffer(int initialCapacity, int maxCapacity) {
        return delegate.heapBuffer(initialCapacity, maxCapacity);
    }

    @Override
    public ByteBuf directBuffer() {
        return delegate.directBuffer();
    }

    @Override
    public ByteBuf directBuffer(int initialCapacity) {
        return delegate.directBuffer(initialCapacity);
    }

    @Override
    public ByteBuf directBuffer(int initialCapacity, int maxCapacity) {
        return delegate.directBuffer(initialCapacity, maxCapacity);
    }

    @Override
    public CompositeByteBuf compositeBuffer() {
        return delegate.compositeBuffer();
    }

    @Override
    public CompositeByteBuf compositeBuffer(int maxNumComponents) {
        return delegate.compositeBuffer(maxNumComponents);
    }

    @Override
    public CompositeByteBuf compositeHeapBuffer() {
        return delegate.compositeHeapBuffer();
    }

    @Override
    public CompositeByteBuf compositeHeapBuffer(int maxNumComponents) {
        return delegate.compositeHeapBuffer(maxNumComponents);
    }

    @Override
    public CompositeByteBuf compositeDirectBuffer() {
        return delegate.compositeDirectBuffer();
    }

    @Override
    public CompositeByteBuf compositeDirectBuffer(int maxNumComponents) {
        return delegate.compositeDirectBuffer(maxNumComponents);
    }

    @Override
    public boolean isDirectBufferPooled() {
        return delegate.isDirectBufferPooled();
    }

    @Override
    public int calculateNewCapacity(int minNewCapacity, int maxCapacity) {
        return delegate.calculateNewCapacity(minNewCapacity, maxCapacity);
    }
}
