package io.mstar.transport.arena;

import io.mstar.transport.MstarTransportException;

/**
 * The shared-memory file system cannot back a new segment. The segmented arena turns it into its
 * "full" outcome, the next rung of the capacity ladder; it never escapes as a SIGBUS later.
 */
final class ShmFullException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    ShmFullException(String message, Throwable cause) {
        super(message, cause);
    }
}
