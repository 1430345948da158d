package io.mstar.transport.exceptions;

/** Base of the library's domain exceptions; all are unchecked. */
public class MstarTransportException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public MstarTransportException(String message) {
        super(message);
    }

    public MstarTransportException(String message, Throwable cause) {
        super(message, cause);
    }
}
