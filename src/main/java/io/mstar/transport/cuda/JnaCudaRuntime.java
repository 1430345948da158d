package io.mstar.transport.cuda;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import io.mstar.transport.exceptions.CudaException;

/**
 * {@link CudaRuntime} through JNA direct mapping ({@link Native#register}): each call is a JNI stub, no
 * proxy or reflection. The class binds once per JVM, to the first library it is loaded from; registering
 * resolves every declared symbol, or fails naming the missing one.
 */
final class JnaCudaRuntime implements CudaRuntime {
    private static String boundTo;
    private static JnaCudaRuntime instance;

    private JnaCudaRuntime() {
    }

    /** Binds to the library at {@code path} (a file or a name the loader finds). */
    static synchronized JnaCudaRuntime bind(String path) {
        if (instance == null) {
            Native.register(JnaCudaRuntime.class, NativeLibrary.getInstance(path));
            boundTo = path;
            instance = new JnaCudaRuntime();
        } else if (!boundTo.equals(path)) {
            throw new IllegalStateException("the CUDA binding is already bound to " + boundTo + ", not " + path);
        }
        return instance;
    }

    /** The library this JVM's binding uses, or null. */
    static synchronized String boundTo() {
        return boundTo;
    }

    /** Names of the functions bound, for the probe's report. */
    static final String[] SYMBOLS = {"cudaGetDeviceCount", "cudaSetDevice", "cudaStreamCreateWithFlags",
        "cudaStreamDestroy", "cudaStreamSynchronize", "cudaMemcpyAsync", "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventQuery",
        "cudaEventSynchronize", "cudaEventDestroy", "cudaHostRegister", "cudaHostUnregister", "cudaMalloc",
        "cudaFree", "cudaGetErrorName", "cudaGetErrorString", "cudaRuntimeGetVersion", "cudaDriverGetVersion"};

    private static native int cudaGetDeviceCount(int[] count);

    private static native int cudaSetDevice(int device);

    private static native int cudaStreamCreateWithFlags(long[] stream, int flags);

    private static native int cudaStreamDestroy(long stream);

    private static native int cudaStreamSynchronize(long stream);

    private static native int cudaMemcpyAsync(long dst, long src, long count, int kind, long stream);

    private static native int cudaEventCreateWithFlags(long[] event, int flags);

    private static native int cudaEventRecord(long event, long stream);

    private static native int cudaEventQuery(long event);

    private static native int cudaEventSynchronize(long event);

    private static native int cudaEventDestroy(long event);

    private static native int cudaHostRegister(long ptr, long size, int flags);

    private static native int cudaHostUnregister(long ptr);

    private static native int cudaMalloc(long[] ptr, long size);

    private static native int cudaFree(long ptr);

    private static native String cudaGetErrorName(int error);

    private static native String cudaGetErrorString(int error);

    private static native int cudaRuntimeGetVersion(int[] version);

    private static native int cudaDriverGetVersion(int[] version);

    private void check(String call, int code) {
        if (code != 0) {
            throw new CudaException(call, code, errorName(code), errorString(code));
        }
    }

    @Override
    public int deviceCount() {
        int[] count = new int[1];
        check("cudaGetDeviceCount", cudaGetDeviceCount(count));
        return count[0];
    }

    @Override
    public void setDevice(int device) {
        check("cudaSetDevice", cudaSetDevice(device));
    }

    @Override
    public long streamCreate(int flags) {
        long[] stream = new long[1];
        check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(stream, flags));
        return stream[0];
    }

    @Override
    public void streamDestroy(long stream) {
        check("cudaStreamDestroy", cudaStreamDestroy(stream));
    }

    @Override
    public void streamSynchronize(long stream) {
        check("cudaStreamSynchronize", cudaStreamSynchronize(stream));
    }

    @Override
    public void memcpyAsync(long dst, long src, long bytes, int kind, long stream) {
        check("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, bytes, kind, stream));
    }

    @Override
    public long eventCreate(int flags) {
        long[] event = new long[1];
        check("cudaEventCreateWithFlags", cudaEventCreateWithFlags(event, flags));
        return event[0];
    }

    @Override
    public void eventRecord(long event, long stream) {
        check("cudaEventRecord", cudaEventRecord(event, stream));
    }

    @Override
    public boolean eventQuery(long event) {
        int code = cudaEventQuery(event);
        if (code == ERROR_NOT_READY) {
            return false;
        }
        check("cudaEventQuery", code);
        return true;
    }

    @Override
    public void eventSynchronize(long event) {
        check("cudaEventSynchronize", cudaEventSynchronize(event));
    }

    @Override
    public void eventDestroy(long event) {
        check("cudaEventDestroy", cudaEventDestroy(event));
    }

    @Override
    public boolean hostRegister(long address, long bytes, int flags) {
        int code = cudaHostRegister(address, bytes, flags);
        if (code == ERROR_ALREADY_REGISTERED) {
            return false;
        }
        check("cudaHostRegister", code);
        return true;
    }

    @Override
    public void hostUnregister(long address) {
        check("cudaHostUnregister", cudaHostUnregister(address));
    }

    @Override
    public long malloc(long bytes) {
        long[] pointer = new long[1];
        check("cudaMalloc", cudaMalloc(pointer, bytes));
        return pointer[0];
    }

    @Override
    public void free(long pointer) {
        check("cudaFree", cudaFree(pointer));
    }

    @Override
    public String errorName(int code) {
        String name = cudaGetErrorName(code);
        return name == null ? "cudaError" + code : name;
    }

    @Override
    public String errorString(int code) {
        String text = cudaGetErrorString(code);
        return text == null ? "" : text;
    }

    @Override
    public int runtimeVersion() {
        int[] version = new int[1];
        check("cudaRuntimeGetVersion", cudaRuntimeGetVersion(version));
        return version[0];
    }

    @Override
    public int driverVersion() {
        int[] version = new int[1];
        check("cudaDriverGetVersion", cudaDriverGetVersion(version));
        return version[0];
    }
}
