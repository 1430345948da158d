package io.mstar.transport.exceptions;

/**
 * A peer on another node is up but refused this process's connection in its handshake, again for a few
 * seconds: it holds another secret ({@code MSTAR_REMOTE_SECRET_FILE}, {@code MSTAR_REMOTE_SECRET}), its map
 * ({@code MSTAR_REMOTE_ENTITIES}) does not place this entity at the address it connects from, or it is at its
 * connection caps. Waiting does not help: the message says which step it refused and what to check.
 */
public class PeerRejectedException extends PeerUnavailableException {
    private static final long serialVersionUID = 1L;

    public PeerRejectedException(String entity, String message) {
        super(entity, message);
    }
}
