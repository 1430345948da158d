package io.mstar.transport.liveness;

/**
 * A producer-side transport whose slots a reader in this process can hold (the arena does; ask with
 * {@code transport.capability(SlotHolds.class)}): a held slot is not reused, even once its tensor is ACKed,
 * found dead or expired, until every hold on it is closed. The cross-node path holds a slot while the socket
 * still has its bytes to write; an application that sends a slot's bytes on a channel of its own does the same.
 */
public interface SlotHolds {
    /** A hold on one slot; closing it twice is harmless. */
    interface Hold extends AutoCloseable {
        @Override
        void close();
    }

    /** A hold that holds nothing: the tensor is not in a slot (a spill file is never reused). */
    Hold NONE = () -> { };

    /** Holds the slot of a tensor in flight, or returns {@link #NONE} when it is in none. */
    Hold hold(long uuidMsb, long uuidLsb);
}
