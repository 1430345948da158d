package io.mstar.transport.exceptions;

/**
 * A peer's shared segment cannot be used: the file is gone (its producer died or stopped), is not a
 * regular file, belongs to another user, or is smaller than the reader needs. Only the tensors in that
 * segment are affected; the transport keeps serving the others.
 */
public class SegmentAccessException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    public SegmentAccessException(String message) {
        super(message);
    }

    public SegmentAccessException(String message, Throwable cause) {
        super(message, cause);
    }
}
