package io.mstar.transport.arena;

import io.mstar.transport.DType;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;

import java.lang.foreign.MemorySegment;
import java.util.UUID;

/**
 * A slot claimed for the producer to write in place ({@link SlotWriter#claim}). It is not in flight until
 * published: neither the TTL nor an ACK can free it while the producer writes.
 */
final class SlotClaim implements TensorClaim {
    private final SlotWriter writer;
    private final String requestId;
    private final DType dtype;
    private final long[] shape;
    private final long nbytes;
    private final long msb;
    private final long lsb;
    private final long slot;
    private final MemorySegment memory;
    private boolean ended;

    SlotClaim(SlotWriter writer, String requestId, DType dtype, long[] shape, long nbytes, long msb, long lsb,
              long slot, MemorySegment memory) {
        this.writer = writer;
        this.requestId = requestId;
        this.dtype = dtype;
        this.shape = shape;
        this.nbytes = nbytes;
        this.msb = msb;
        this.lsb = lsb;
        this.slot = slot;
        this.memory = memory;
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
        return writer.publish(uuid(), requestId, dtype, shape, nbytes, slot);
    }

    @Override
    public int publish(MemorySegment out, long offset) {
        end();
        return writer.publish(msb, lsb, requestId, dtype, shape, nbytes, slot, out, offset);
    }

    @Override
    public void abort() {
        end();
        writer.abort(slot, nbytes);
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
