package io.mstar.transport;

/**
 * An immutable snapshot of this process's cross-node path ({@link TensorEndpoint#remoteStats()}).
 *
 * @param tensorsSent      tensors this process sent to entities on other nodes
 * @param bytesSent        their bytes
 * @param landed           of those, the ones the receiving node confirmed whole in its arena (each confirmation
 *                         reaches the application as the consumer's ACK)
 * @param timedOut         of those, the ones not confirmed within {@code MSTAR_REMOTE_TIMEOUT_S}: their node is
 *                         taken as gone for them, and an attached transport frees them (its
 *                         {@code deadConsumerReclaims})
 * @param lateConfirmations confirmations that came after their tensor timed out: ignored
 * @param tensorsReceived  tensors that arrived whole from other nodes and went to the local consumer
 * @param bytesReceived    their bytes
 * @param aborted          tensors that arrived torn (cut off, out of order, wrong length or checksum): freed,
 *                         never delivered
 * @param misrouted        tensors that arrived for another entity than this process's: dropped
 * @param refused          tensors and ACKs from other nodes that the mailbox's listener threw on (logged)
 */
public record RemoteStats(long tensorsSent, long bytesSent, long landed, long timedOut, long lateConfirmations,
                          long tensorsReceived, long bytesReceived, long aborted, long misrouted, long refused) {
    /** One {@code key=value} line for logs. */
    public String toLogLine() {
        return "remoteTensorsSent=" + tensorsSent + " remoteBytesSent=" + bytesSent + " remoteLanded=" + landed
            + " remoteTimedOut=" + timedOut + " remoteLateConfirmations=" + lateConfirmations
            + " remoteTensorsReceived=" + tensorsReceived + " remoteBytesReceived=" + bytesReceived
            + " remoteAborted=" + aborted + " remoteMisrouted=" + misrouted + " remoteRefused=" + refused;
    }
}
