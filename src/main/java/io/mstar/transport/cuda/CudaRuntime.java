package io.mstar.transport.cuda;

import io.mstar.transport.exceptions.CudaException;

/**
 * The subset of the CUDA runtime API the transports use, free of JNA types so that callers and tests do
 * not depend on the binding. Pointers, streams and events are raw addresses ({@code long}). Every call
 * that fails throws {@link CudaException} with the call, the code, its name and the runtime's text.
 */
public interface CudaRuntime {
    /** {@code cudaMemcpyHostToDevice}. */
    int HOST_TO_DEVICE = 1;
    /** {@code cudaMemcpyDeviceToHost}. */
    int DEVICE_TO_HOST = 2;
    /** {@code cudaStreamNonBlocking}: the copy stream does not wait for the legacy default stream. */
    int STREAM_NON_BLOCKING = 1;
    /** {@code cudaEventDisableTiming}: the cheapest event, for completion only. */
    int EVENT_DISABLE_TIMING = 2;
    /** {@code cudaHostRegisterPortable}. */
    int HOST_REGISTER_PORTABLE = 1;
    /** {@code cudaErrorNotReady}. */
    int ERROR_NOT_READY = 600;
    /** {@code cudaErrorHostMemoryAlreadyRegistered}. */
    int ERROR_ALREADY_REGISTERED = 712;

    int deviceCount();

    void setDevice(int device);

    long streamCreate(int flags);

    void streamDestroy(long stream);

    /** {@code cudaStreamSynchronize}: waits for the work queued on {@code stream} (0: the legacy default stream). */
    void streamSynchronize(long stream);

    void memcpyAsync(long dst, long src, long bytes, int kind, long stream);

    long eventCreate(int flags);

    void eventRecord(long event, long stream);

    /** True when every operation before the event's record has run. */
    boolean eventQuery(long event);

    void eventSynchronize(long event);

    void eventDestroy(long event);

    /** Pins a host range; false when it was already registered (code 712), which callers treat as success. */
    boolean hostRegister(long address, long bytes, int flags);

    void hostUnregister(long address);

    long malloc(long bytes);

    void free(long pointer);

    String errorName(int code);

    String errorString(int code);

    int runtimeVersion();

    int driverVersion();
}
