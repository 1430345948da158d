package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;

import java.lang.foreign.MemorySegment;
import java.util.UUID;

/**
 * A slot claimed for the producer to write in place ({@link SlotWriter#claim}). It is not in flight until
 * published: neither the TTL nor an ACK can free it while the producer writes.
 *
 * <p>Once published or aborted on the thread that made it, it is reused by that thread's next claim, so
 * that a claim allocates nothing in steady state. One published or aborted on another thread is never
 * reused: the thread that made it could rearm it while the other still reads its fields.
 */
final class SlotClaim implements TensorClaim {
    private final SlotWriter writer;
    private String requestId;
    private DType dtype;
    private long[] shape = new long[0];
    private long nbytes;
    private long msb;
    private long lsb;
    private long slot;
    private MemorySegment memory;
    private boolean ended;
    private boolean reusable;
    private final Thread owner = Thread.currentThread();

    SlotClaim(SlotWriter writer) {
        this.writer = writer;
    }

    /** Points this claim at a freshly reserved slot; {@code shape} is copied. */
    SlotClaim arm(String requestId, DType dtype, long[] shape, long nbytes, long msb, long lsb, long slot,
                  MemorySegment memory) {
        this.requestId = requestId;
        this.dtype = dtype;
        if (this.shape.length != shape.length) {
            this.shape = new long[shape.length];
        }
        System.arraycopy(shape, 0, this.shape, 0, shape.length);
        this.nbytes = nbytes;
        this.msb = msb;
        this.lsb = lsb;
        this.slot = slot;
        this.memory = memory;
        this.ended = false;
        this.reusable = false;
        return this;
    }

    /** Whether this claim was published or aborted by the thread that made it (the only one that asks). */
    boolean reusable() {
        return reusable;
    }

    @Override
    public UUID uuid() {
        return new UUID(msb, lsb);
    }

    @Override
    public long uuidMsb() {
        return msb;
    }

    @Override
    public long uuidLsb() {
        return lsb;
    }

    @Override
    public String requestId() {
        return requestId;
    }

    @Override
    public MemorySegment memory() {
        checkOpen();
        return memory;
    }

    @Override
    public TensorDescriptor publish() {
        end();
        try {
            return writer.publish(uuid(), requestId, dtype, shape.clone(), nbytes, slot);
        } finally {
            reusable = Thread.currentThread() == owner;
        }
    }

    @Override
    public int publish(MemorySegment out, long offset) {
        end();
        try {
            return writer.publish(msb, lsb, requestId, dtype, shape, nbytes, slot, out, offset);
        } finally {
            reusable = Thread.currentThread() == owner;
        }
    }

    @Override
    public void abort() {
        end();
        try {
            writer.abort(slot, nbytes);
        } finally {
            reusable = Thread.currentThread() == owner;
        }
    }

    @Override
    public void close() {
        if (!ended) {
            abort();
        }
    }

    private void end() {
        checkOpen();
        ended = true;
    }

    private void checkOpen() {
        if (ended) {
            throw new IllegalStateException("claim was published or aborted already: uuid=" + uuid());
        }
    }
}
