package io.mstar.transport.exceptions;

import java.util.UUID;

/**
 * A tensor's slot no longer holds that tensor: its stamp names another tensor or none, so the slot was freed
 * and reused under the reader (a bug somewhere, or a producer that freed it after its consumer was taken for
 * dead). The tensor is refused, never handed over as good; the endpoint tells its producer and counts it in
 * {@code staleReads}. Only this tensor is affected.
 */
public final class StaleTensorException extends SegmentAccessException {
    private static final long serialVersionUID = 1L;

    private final UUID uuid;

    public StaleTensorException(UUID uuid, String message) {
        super(message);
        this.uuid = uuid;
    }

    /** The tensor that was refused. */
    public UUID uuid() {
        return uuid;
    }
}
