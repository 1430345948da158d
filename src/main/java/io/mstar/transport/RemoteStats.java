package io.mstar.transport;

/**
 * An immutable snapshot of this process's cross-node path ({@link TensorEndpoint#remoteStats()}).
 *
 * @param tensorsSent         tensors this process sent to entities on other nodes
 * @param bytesSent           their bytes
 * @param landed              of those, the ones the receiving node confirmed whole in its arena (each confirmation
 *                            reaches the application as the consumer's ACK)
 * @param timedOut            of those, the ones not confirmed within {@code MSTAR_REMOTE_TIMEOUT_S}: their node is
 *                            taken as gone for them, and an attached transport frees them
 * @param inDoubt             of those timed out, the ones that had left whole: they may have been handed over there
 *                            (told {@code IN_DOUBT}); the others never were (told {@code REMOTE_TIMEOUT})
 * @param refusedThere        of those, the ones the receiving node refused (no room, corrupted on the way)
 * @param lateConfirmations   confirmations that came after their tensor timed out: ignored
 * @param tensorsReceived     tensors that arrived whole from other nodes and went to the local consumer
 * @param bytesReceived       their bytes
 * @param aborted             tensors that arrived torn (cut off, wrong checksum, bytes that stopped): freed, never
 *                            delivered
 * @param refusedHere         tensors from other nodes this node refused (no room in its arena)
 * @param duplicates          tensors from other nodes sent again after an in-doubt outcome that had landed here
 *                            already: confirmed again, not handed over a second time
 * @param connections         authenticated connections open now, both ways: from other nodes, and this node's to them
 * @param rejectedConnections connections closed before or after their handshake: a stranger, a wrong secret, an
 *                            entity the map does not place at that address, a broken frame, too many connections
 * @param protocolErrors      of those, the ones closed after authenticating (a peer of the deployment that broke
 *                            the protocol)
 * @param refused             tensors and ACKs from other nodes that the mailbox's listener threw on (logged)
 */
public record RemoteStats(long tensorsSent, long bytesSent, long landed, long timedOut, long inDoubt,
                          long refusedThere, long lateConfirmations, long tensorsReceived, long bytesReceived,
                          long aborted, long refusedHere, long duplicates, long connections, long rejectedConnections,
                          long protocolErrors, long refused) {
    /** One {@code key=value} line for logs. */
    public String toLogLine() {
        return "remoteTensorsSent=" + tensorsSent + " remoteBytesSent=" + bytesSent + " remoteLanded=" + landed
            + " remoteTimedOut=" + timedOut + " remoteInDoubt=" + inDoubt + " remoteRefusedThere=" + refusedThere
            + " remoteLateConfirmations=" + lateConfirmations + " remoteTensorsReceived=" + tensorsReceived
            + " remoteBytesReceived=" + bytesReceived + " remoteAborted=" + aborted + " remoteRefusedHere="
            + refusedHere + " remoteDuplicates=" + duplicates + " remoteConnections=" + connections
            + " remoteRejectedConnections=" + rejectedConnections + " remoteProtocolErrors=" + protocolErrors
            + " remoteRefused=" + refused;
    }
}
