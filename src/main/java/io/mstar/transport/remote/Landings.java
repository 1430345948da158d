package io.mstar.transport.remote;

import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What other nodes' entities landed in this process, per sender: its budget ({@link SenderBudget}), its
 * {@link DuplicateWindow}, and each landed tensor's bytes on that budget until the local consumer's ACK.
 */
final class Landings {
    /** A tensor that landed here, until the local consumer's ACK. */
    private record Landed(SenderBudget budget, long nbytes) {
    }

    private final long maxBytes;
    private final int maxTensors;
    private final long windowNs;
    private final long maxGapNs;
    private final Set<String> senders = ConcurrentHashMap.newKeySet(); // entities whose tensors landed here
    private final Map<String, SenderBudget> budgets = new ConcurrentHashMap<>();
    private final Map<String, DuplicateWindow> windows = new ConcurrentHashMap<>();
    private final Map<UUID, Landed> landed = new ConcurrentHashMap<>();

    Landings(long maxBytes, int maxTensors, long windowNs, long maxGapNs) {
        this.maxBytes = maxBytes;
        this.maxTensors = maxTensors;
        this.windowNs = windowNs;
        this.maxGapNs = maxGapNs;
    }

    /** Whether tensors from {@code entity} landed here. */
    boolean from(String entity) {
        return senders.contains(entity);
    }

    SenderBudget budgetOf(String sender) {
        return budgets.computeIfAbsent(sender, s -> new SenderBudget(maxBytes, maxTensors));
    }

    /** What landed here lately from {@code sender}, by first uuid: a repost of one of them is not handed over again. */
    DuplicateWindow windowOf(String sender) {
        return windows.computeIfAbsent(sender, s -> new DuplicateWindow(windowNs, maxGapNs));
    }

    /** A whole tensor from {@code sender}, landed as {@code uuid}: its bytes stay on the budget until its ACK. */
    void landed(String sender, SenderBudget budget, UUID uuid, long nbytes) {
        senders.add(sender);
        landed.put(uuid, new Landed(budget, nbytes));
    }

    /** The local consumer ACKed the tensor landed as {@code uuid}: its bytes leave its sender's budget. */
    void acked(UUID uuid) {
        Landed l = landed.remove(uuid);
        if (l != null) {
            l.budget().release(l.nbytes());
        }
    }
}
