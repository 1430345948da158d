package io.mstar.transport.shm;

import io.mstar.transport.exceptions.MstarTransportException;

/**
 * The shared-memory file system cannot back a new segment. The segmented arena turns it into its
 * "full" outcome, the next rung of the capacity ladder; it never escapes as a SIGBUS later.
 */
public final class ShmFullException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    public ShmFullException(String message, Throwable cause) {
        super(message, cause);
    }
}
