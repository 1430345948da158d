package io.mstar.transport.remote;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;

/**
 * The uuid each repost of this process was first sent under ({@code TensorEndpoint.repost}), so that its TENSOR
 * frame names the first send, and a repost of a repost names the same one. The last {@value #KEPT} are kept; a
 * first send reads no map.
 */
final class Reposts {
    private static final int KEPT = 65_536;

    private final Map<UUID, UUID> firstSentAs = Collections.synchronizedMap(new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<UUID, UUID> eldest) {
            return size() > KEPT;
        }
    });
    private volatile boolean any;

    /** The tensor of uuid {@code msb, lsb} repeats the one of uuid {@code inDoubtMsb, inDoubtLsb}. */
    void add(long msb, long lsb, long inDoubtMsb, long inDoubtLsb) {
        UUID named = new UUID(inDoubtMsb, inDoubtLsb);
        firstSentAs.put(new UUID(msb, lsb), firstSentAs.getOrDefault(named, named));
        any = true;
    }

    /** The uuid {@code uuid} was first sent under when it is a repost, else null. */
    UUID firstOf(UUID uuid) {
        return any ? firstSentAs.get(uuid) : null;
    }
}
