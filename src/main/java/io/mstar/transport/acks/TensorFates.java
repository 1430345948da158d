package io.mstar.transport.acks;

/**
 * Told when a transport frees a tensor it sent, and why: the endpoint turns these into each tensor's
 * outcome. Called on the thread that freed it (an ACK's, the liveness check's, the TTL's); must not
 * throw and should return quickly.
 */
public interface TensorFates {
    TensorFates NONE = new TensorFates() {
        @Override
        public void freed(long uuidMsb, long uuidLsb, Fate fate, String consumer) {
        }
    };

    /**
     * @param consumer the consumer that died (its liveness key), or null when the fate names none
     */
    void freed(long uuidMsb, long uuidLsb, Fate fate, String consumer);

    /**
     * Called before tensors are freed for a consumer found dead: reads the ACKs that have arrived and not yet
     * been read, so that a consumer that ACKed and then exited is not taken for one that died holding them.
     */
    default void settle() {
    }

    /** Why a sent tensor was freed. */
    enum Fate {
        /** Its consumer ACKed it (every named consumer, for a fan-out tensor). */
        ACKED,
        /** Its consumer (or the last of its consumers) died, or on another node did not confirm it in time. */
        CONSUMER_DIED,
        /** It waited longer than the slot TTL for its ACK. */
        EXPIRED,
        /** One consumer of a fan-out tensor died; the others still hold it (not freed yet). */
        SHARE_LOST
    }

    /** A transport that reports its tensors' fates (both built-in ones do). */
    interface Source {
        void reportFatesTo(TensorFates fates);
    }
}
