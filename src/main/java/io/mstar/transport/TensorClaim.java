package io.mstar.transport;

import java.lang.foreign.MemorySegment;
import java.util.UUID;

/**
 * Room for one tensor, claimed with {@link TensorTransport#claim}: the producer writes the tensor's bytes
 * straight into {@link #memory()} (no copy), then {@linkplain #publish() publishes} it, which makes its
 * descriptor, or {@linkplain #abort() aborts} it, which frees the room and publishes nothing.
 *
 * <p>Who may write when: only the producer, only between the claim and its publish or abort; from then on
 * the memory belongs to the consumer (until its ACK) or to the allocator, and the producer must not touch
 * it. Exactly one of publish and abort takes effect; a second call throws {@link IllegalStateException}.
 * {@link #close()} aborts a claim that was neither published nor aborted, so try-with-resources never
 * leaks one; a claim still open when its transport closes is freed then and counted
 * ({@code claimsAbandoned}). A claim is not thread-safe: use it from one thread at a time.
 *
 * <p>An arena claim published or aborted on the thread that made it is reused by that thread's next claim
 * (so that claiming allocates nothing in steady state): keep no reference to a claim past its publish, post
 * or close. The shape passed to {@code claim} is copied; reuse one array for it.
 */
public interface TensorClaim extends AutoCloseable {
    /** The tensor's uuid, as its descriptor will carry it (a new object each call: see the halves). */
    UUID uuid();

    /** The high half of the tensor's uuid, as a {@link DeliveryListener} hears it; allocates nothing. */
    long uuidMsb();

    /** The low half of the tensor's uuid, as a {@link DeliveryListener} hears it; allocates nothing. */
    long uuidLsb();

    /** The request id the tensor was claimed for. */
    String requestId();

    /** Writable memory of exactly the tensor's bytes: a slot of the arena, or a spill file mapped writable. */
    MemorySegment memory();

    /**
     * Publishes the tensor: from now on it is in flight like a sent one, and freed by its ACK.
     *
     * @return its descriptor, to carry to the consumer
     */
    TensorDescriptor publish();

    /**
     * As {@link #publish()}, writing the descriptor's record ({@code DescriptorCodec}'s binary form) at
     * {@code offset} of {@code out} instead: on the arena this allocates nothing.
     *
     * @return the bytes written
     */
    int publish(MemorySegment out, long offset);

    /** Frees the room; nothing is published. */
    void abort();

    /** Aborts the claim unless it was published or aborted. */
    @Override
    void close();
}
