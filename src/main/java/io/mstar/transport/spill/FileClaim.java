package io.mstar.transport.spill;

import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.metrics.TransportCounters;
import io.mstar.transport.shm.MappedSegment;

import java.lang.foreign.MemorySegment;
import java.util.UUID;

/**
 * A tensor's own file, claimed for the producer to write in place ({@link SpillStore#claim}): mapped
 * writable for any thread until it is published (unmapped, then in flight in the store) or aborted
 * (unmapped and removed).
 */
public final class FileClaim implements TensorClaim {
    private final SpillStore store;
    private final TransportCounters counters;
    private final boolean spill;
    private final TensorDescriptor descriptor;
    private final MappedSegment mapping; // null for a zero-byte tensor
    private boolean ended;

    FileClaim(SpillStore store, TransportCounters counters, boolean spill, TensorDescriptor descriptor,
              MappedSegment mapping) {
        this.store = store;
        this.counters = counters;
        this.spill = spill;
        this.descriptor = descriptor;
        this.mapping = mapping;
        counters.claimOpened();
    }

    @Override
    public UUID uuid() {
        return descriptor.uuid();
    }

    @Override
    public long uuidMsb() {
        return descriptor.uuid().getMostSignificantBits();
    }

    @Override
    public long uuidLsb() {
        return descriptor.uuid().getLeastSignificantBits();
    }

    @Override
    public String requestId() {
        return descriptor.requestId();
    }

    @Override
    public MemorySegment memory() {
        checkOpen();
        return mapping == null ? MemorySegment.NULL : mapping.memory().asSlice(0, descriptor.nbytes());
    }

    @Override
    public TensorDescriptor publish() {
        end();
        store.publish(descriptor.uuid());
        if (spill) {
            counters.spilled(descriptor.nbytes());
        } else {
            counters.sent(descriptor.nbytes());
        }
        return descriptor;
    }

    @Override
    public int publish(MemorySegment out, long offset) {
        return DescriptorCodec.encode(publish(), out, offset);
    }

    @Override
    public void abort() {
        end();
        store.abort(descriptor.uuid());
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
        counters.claimEnded();
        if (mapping != null) {
            mapping.unmap(); // the producer's writes are in the file; nobody writes through this mapping again
        }
    }

    private void checkOpen() {
        if (ended) {
            throw new IllegalStateException("claim was published or aborted already: uuid=" + descriptor.uuid());
        }
    }
}
