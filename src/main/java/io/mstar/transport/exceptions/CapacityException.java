package io.mstar.transport.exceptions;

/**
 * No room for a tensor: in strict mode ({@code MSTAR_SHM_ARENA_SPILL=0}) the arena stayed full for
 * {@code MSTAR_SHM_ARENA_FULL_TIMEOUT_S}, or the shared-memory file system cannot hold even a spill
 * file. Nothing of the failed batch stays reserved; the caller may retry.
 */
public class CapacityException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    public CapacityException(String message) {
        super(message);
    }

    public CapacityException(String message, Throwable cause) {
        super(message, cause);
    }
}
