package io.mstar.transport.exceptions;

/**
 * Another live process already runs as this entity in this deployment (it holds the entity's mailbox),
 * or another user's file sits at the entity's mailbox name (the message names its path and owner).
 * A process that starts under the entity of a dead one takes its place instead; this is only thrown
 * while the other one lives.
 */
public class EntityInUseException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    public EntityInUseException(String message) {
        super(message);
    }
}
