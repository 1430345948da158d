package io.mstar.transport.lifecycle;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.UUID;

/**
 * Tensor uuids: random version-4 uuids from the JDK's DRBG ({@code SecureRandom.getInstance("DRBG")}, NIST
 * SP 800-90A, seeded by the operating system), so no uuid can be derived from earlier ones: a peer that
 * saw one tensor's uuid cannot name another's (to forge its ACK, say). One generator per thread, drawn
 * {@value #BATCH_BYTES} bytes at a time, so a uuid costs a copy from the batch and no lock; allocation-free
 * through {@link #next()}, {@link #msb()} and {@link #lsb()}.
 */
public final class TensorUuids {
    static final int BATCH_BYTES = 64 << 10; // a DRBG call allocates about 200 B: 0.05 B per uuid at this size
    private static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final ThreadLocal<TensorUuids> PER_THREAD = ThreadLocal.withInitial(TensorUuids::new);

    private final SecureRandom drbg;
    private final byte[] batch = new byte[BATCH_BYTES];
    private int used = BATCH_BYTES;
    private long msb;
    private long lsb;

    private TensorUuids() {
        try {
            drbg = SecureRandom.getInstance("DRBG");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("this JDK has no DRBG SecureRandom", e);
        }
    }

    /** This thread's generator. */
    public static TensorUuids current() {
        return PER_THREAD.get();
    }

    /** A new random uuid. */
    public static UUID newUuid() {
        TensorUuids ids = current();
        ids.next();
        return new UUID(ids.msb, ids.lsb);
    }

    /** Draws the next uuid, read with {@link #msb()} and {@link #lsb()}. */
    public void next() {
        if (used == BATCH_BYTES) {
            drbg.nextBytes(batch);
            used = 0;
        }
        msb = ((long) LONGS.get(batch, used) & ~0xF000L) | 0x4000L; // version 4
        lsb = ((long) LONGS.get(batch, used + 8) & ~(3L << 62)) | (1L << 63); // variant 10
        used += 16;
    }

    /** The most significant half of the uuid drawn last. */
    public long msb() {
        return msb;
    }

    /** The least significant half of the uuid drawn last. */
    public long lsb() {
        return lsb;
    }
}
