package io.mstar.transport.exceptions;

/**
 * A libc call failed. Carries the call, the errno with its symbolic name and text, and the path it
 * acted on, e.g. {@code open failed: errno=EEXIST (17) File exists, path=/dev/shm/mstar_...}.
 */
public class NativeCallException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    private final String call;
    private final int errno;
    private final String errnoName;
    private final String path;

    public NativeCallException(String call, int errno, String errnoName, String errnoText, String path) {
        super(call + " failed: errno=" + errnoName + " (" + errno + ") " + errnoText
            + (path == null ? "" : ", path=" + path));
        this.call = call;
        this.errno = errno;
        this.errnoName = errnoName;
        this.path = path;
    }

    /** The libc function that failed, e.g. {@code posix_fallocate}. */
    public String call() {
        return call;
    }

    /** The raw errno value. */
    public int errno() {
        return errno;
    }

    /** The symbolic errno name, e.g. {@code ENOSPC}. */
    public String errnoName() {
        return errnoName;
    }

    /** The path the call acted on, or {@code null}. */
    public String path() {
        return path;
    }
}
