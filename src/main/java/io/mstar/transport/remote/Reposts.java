package io.mstar.transport.remote;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.UUID;

/**
 * The uuid each repost of this process was first sent under ({@code TensorEndpoint.repost}), so that its TENSOR
 * frame names the first send, and a repost of a repost names the same one. Kept until {@value
 * DuplicateWindow#MAX_TENSORS} younger reposts push it out, never by age: a receiver's {@link DuplicateWindow} ages
 * on the sender's time, which stands still while nothing of this sender lands there (a partition, a producer
 * backing off), so no clock here can tell when every receiver forgot the first send. Forgotten too early, a repost
 * would go under a uuid the receiver never saw and be handed over twice; remembered longer, it only names a first
 * send the receiver no longer knows, and lands as new. The receiver's window holds as many of this sender's
 * tensors, reposted or not, so the count alone keeps this map at least as long. A first send reads no map.
 * Thread-safe.
 */
final class Reposts {
    private final int max;
    private final LinkedHashMap<UUID, UUID> firstSentAs = new LinkedHashMap<>(); // guarded by itself, oldest first
    private volatile boolean any;

    Reposts() {
        this(DuplicateWindow.MAX_TENSORS);
    }

    Reposts(int max) {
        this.max = max;
    }

    /** The tensor of uuid {@code msb, lsb} repeats the one of uuid {@code inDoubtMsb, inDoubtLsb}. */
    void add(long msb, long lsb, long inDoubtMsb, long inDoubtLsb) {
        UUID named = new UUID(inDoubtMsb, inDoubtLsb);
        synchronized (firstSentAs) {
            UUID earlier = firstSentAs.get(named);
            firstSentAs.put(new UUID(msb, lsb), earlier == null ? named : earlier);
            Iterator<UUID> oldest = firstSentAs.values().iterator();
            while (firstSentAs.size() > max) {
                oldest.next();
                oldest.remove(); // a receiver's window, bound alike, pushed its first send out before
            }
        }
        any = true;
    }

    /** The uuid {@code uuid} was first sent under when it is a repost, else null. */
    UUID firstOf(UUID uuid) {
        if (!any) {
            return null;
        }
        synchronized (firstSentAs) {
            return firstSentAs.get(uuid);
        }
    }

    /** How many reposts are remembered. */
    int size() {
        synchronized (firstSentAs) {
            return firstSentAs.size();
        }
    }
}
