package io.mstar.transport.jmx;

import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportStats;

/**
 * A transport as JMX shows it: every transport registers one in the platform MBean server while it is
 * open, named {@code io.mstar.transport:type=TensorTransport,namespace=<16 hex digits>,entity=<entity>}
 * (a second transport of the same entity in one process adds {@code ,instance=2}, and so on).
 * {@link #getStats()} is the whole snapshot as composite data (its fields, the arena's and the latency
 * histograms'); the other attributes are the ones worth a graph. Each read takes a fresh snapshot.
 */
public interface TransportMXBean {
    /** The domain of the transports' object names. */
    String DOMAIN = "io.mstar.transport";

    TransportStats getStats();

    /**
     * The cross-node path's counters (sent, landed, timed out, in doubt, received, duplicates, connections...) of
     * the endpoint this transport belongs to, as composite data; null when it is not on that path.
     */
    RemoteStats getRemote();

    String getEntity();

    String getNamespace();

    long getTensorsSent();

    long getBytesSent();

    long getInFlight();

    long getSpills();

    long getAcks();

    long getRefusals();

    /** Bytes of the arena's segments in use; 0 for the file transport. */
    long getArenaUsedBytes();

    long getSendToAckP99Ns();

    long getReceiveToReleaseP99Ns();
}
