package io.mstar.transport.exceptions;

/**
 * A peer of the deployment cannot be reached: it never started, or it died and has not come back. Thrown
 * instead of writing into a mailbox that nobody reads. What the failed call would have delivered is
 * still the caller's: descriptors stay in flight (send them again once the peer is back, or free them
 * with the transport's {@code ack}; the endpoint reports such tensors {@code REFUSED} and frees them).
 */
public class PeerUnavailableException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    private final String entity;

    public PeerUnavailableException(String entity, String message) {
        super(message);
        this.entity = entity;
    }

    /** The entity that could not be reached. */
    public String entity() {
        return entity;
    }
}
