package io.mstar.transport.remote;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/**
 * The uuid each repost of this process was first sent under ({@code TensorEndpoint.repost}), so that its TENSOR
 * frame names the first send, and a repost of a repost names the same one. Kept as long as a receiver's
 * {@link DuplicateWindow} can remember the first send ({@code retainNs}, up to {@value DuplicateWindow#MAX_TENSORS}
 * of them): no smaller map here, so a repost that waited long in a queue still names its first send. A first send
 * reads no map. Thread-safe.
 */
final class Reposts {
    private record First(UUID uuid, long addedNs) {
    }

    private final long retainNs;
    private final int max;
    private final LinkedHashMap<UUID, First> firstSentAs = new LinkedHashMap<>(); // guarded by itself, oldest first
    private volatile boolean any;

    Reposts(long retainNs) {
        this(retainNs, DuplicateWindow.MAX_TENSORS);
    }

    Reposts(long retainNs, int max) {
        this.retainNs = retainNs;
        this.max = max;
    }

    /** The tensor of uuid {@code msb, lsb} repeats the one of uuid {@code inDoubtMsb, inDoubtLsb}. */
    void add(long msb, long lsb, long inDoubtMsb, long inDoubtLsb) {
        UUID named = new UUID(inDoubtMsb, inDoubtLsb);
        long now = System.nanoTime();
        synchronized (firstSentAs) {
            First earlier = firstSentAs.get(named);
            firstSentAs.put(new UUID(msb, lsb), new First(earlier == null ? named : earlier.uuid(), now));
            Iterator<First> oldest = firstSentAs.values().iterator();
            while (oldest.hasNext()) {
                First f = oldest.next();
                if (firstSentAs.size() <= max && now - f.addedNs() <= retainNs) {
                    break;
                }
                oldest.remove(); // no receiver remembers its first send any more
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
            First f = firstSentAs.get(uuid);
            return f == null ? null : f.uuid();
        }
    }

    /** How many reposts are remembered. */
    int size() {
        synchronized (firstSentAs) {
            return firstSentAs.size();
        }
    }
}
