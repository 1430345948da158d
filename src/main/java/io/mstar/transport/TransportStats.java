package io.mstar.transport;

/**
 * An immutable snapshot of a transport.
 *
 * @param transport          {@code arena} or {@code file}
 * @param arena              the arena's own snapshot; null for the file transport
 * @param tensorsSent        tensors sent since start (arena slots and spill files)
 * @param bytesSent          their bytes
 * @param inFlight           tensors sent and not yet ACKed
 * @param oldestInFlightNs   how long the tensor in flight longest has waited for its ACK (0 when none; arena slots)
 * @param spills             tensors that went to a spill file because the arena was full
 * @param spillBytes         their bytes
 * @param backpressureWaits  sends that waited on a full arena for ACKs
 * @param backpressureWaitNs total time of those waits
 * @param acks               ACKs that freed a tensor its consumer handled
 * @param refusals           tensors freed because their consumer refused them or never got them (an endpoint's
 *                           {@code REFUSED} and {@code REJECTED} outcomes): not ACKs
 * @param unknownAcks        ACKs of uuids not in flight (duplicates, or not ours): ignored
 * @param ignoredAcks        ACKs of fan-out tensors that did not count: a repeat from the same consumer, one from
 *                           a consumer that was not named, or one that does not say which consumer sent it
 * @param partiallyAcked     fan-out tensors that some but not all of their consumers have ACKed, now
 * @param ttlReclaims        slots reclaimed because no ACK came within {@code MSTAR_SHM_ARENA_SLOT_TTL_S}
 * @param deadConsumerReclaims tensors freed because the consumer they went to died
 * @param claimsAbandoned    claims neither published nor aborted when their transport closed (freed then)
 * @param tensorsReceived    tensors opened or copied by this process as a consumer
 * @param staleReads         tensors refused as a consumer because their slot was reused under the read (its
 *                           stamp named another tensor): never handed over as good, their producers told
 * @param mappedPeerSegments peer segments mapped now
 * @param pinnedBytes        bytes of mapped segments registered with CUDA
 * @param pinnedSegments     segments registered with CUDA
 * @param cuda               {@code ok}, {@code not used yet}, or why CUDA is not usable
 * @param sendToAck          from a tensor's send (or publish) to the ACK that freed it, as a producer
 * @param receiveToRelease   from a tensor's receive to the close of its view (which comes right before its
 *                           ACK), as a consumer; on the record path one read in 16 is timed
 */
public record TransportStats(
    String transport,
    ArenaStats arena,
    long tensorsSent,
    long bytesSent,
    long inFlight,
    long oldestInFlightNs,
    long spills,
    long spillBytes,
    long backpressureWaits,
    long backpressureWaitNs,
    long acks,
    long refusals,
    long unknownAcks,
    long ignoredAcks,
    int partiallyAcked,
    long ttlReclaims,
    long deadConsumerReclaims,
    long claimsAbandoned,
    long tensorsReceived,
    long staleReads,
    int mappedPeerSegments,
    long pinnedBytes,
    int pinnedSegments,
    String cuda,
    LatencyStats sendToAck,
    LatencyStats receiveToRelease) {

    /** One {@code key=value} line for logs. */
    public String toLogLine() {
        return "transport=" + transport + " tensorsSent=" + tensorsSent + " bytesSent=" + bytesSent
            + " inFlight=" + inFlight + " oldestInFlightMs=" + oldestInFlightNs / 1_000_000 + " spills=" + spills + " spillBytes=" + spillBytes
            + " backpressureWaits=" + backpressureWaits + " backpressureWaitMs=" + backpressureWaitNs / 1_000_000
            + " acks=" + acks + " refusals=" + refusals + " unknownAcks=" + unknownAcks + " ignoredAcks=" + ignoredAcks
            + " partiallyAcked=" + partiallyAcked + " ttlReclaims=" + ttlReclaims
            + " deadConsumerReclaims=" + deadConsumerReclaims + " claimsAbandoned=" + claimsAbandoned
            + " tensorsReceived=" + tensorsReceived + " staleReads=" + staleReads + " mappedPeerSegments=" + mappedPeerSegments
            + " pinnedBytes=" + pinnedBytes + " pinnedSegments=" + pinnedSegments + " cuda=\"" + cuda + "\""
            + " " + sendToAck.toLogFields("sendToAck") + " " + receiveToRelease.toLogFields("receiveToRelease")
            + (arena == null ? "" : " " + arena.toLogLine());
    }
}
