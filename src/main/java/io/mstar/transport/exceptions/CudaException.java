package io.mstar.transport.exceptions;

/**
 * A CUDA runtime call failed: carries the call, the error code, its name and the runtime's text, e.g.
 * {@code cudaGetDeviceCount failed: cudaErrorInsufficientDriver (35): CUDA driver version is insufficient
 * for CUDA runtime version}.
 */
public class CudaException extends MstarTransportException {
    private static final long serialVersionUID = 1L;

    private final String call;
    private final int code;
    private final String errorName;

    public CudaException(String call, int code, String errorName, String errorText) {
        super(call + " failed: " + errorName + " (" + code + "): " + errorText);
        this.call = call;
        this.code = code;
        this.errorName = errorName;
    }

    public String call() {
        return call;
    }

    public int code() {
        return code;
    }

    public String errorName() {
        return errorName;
    }
}
