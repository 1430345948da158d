package io.mstar.transport.cuda;

import io.mstar.transport.lifecycle.CloseOnce;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A transport's copy stream: device-to-host copies of a whole batch with one host wait, and
 * host-to-device copies whose futures complete when their event does. Copies are issued in call order
 * on one non-blocking stream. Thread-safe.
 */
public final class CopyEngine implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(CopyEngine.class);

    private final CudaRuntime cuda;
    private final long stream;
    private final ExecutorService waiter;
    private final CloseOnce closer = new CloseOnce();

    public CopyEngine(CudaRuntime cuda) {
        this.cuda = cuda;
        this.stream = cuda.streamCreate(CudaRuntime.STREAM_NON_BLOCKING);
        this.waiter = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "mstar-cuda-copy-events");
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Copies {@code bytes[i]} from {@code devices[i]} to {@code hosts[i]} for every i, and waits once for all.
     * Unless {@code sourcesSynchronized}, first waits for the legacy default stream (once for the whole
     * batch), so that what kernels wrote there into the sources is what the copies read: the copy stream is
     * non-blocking and would not wait for it.
     */
    public void deviceToHost(long[] hosts, long[] devices, long[] bytes, boolean sourcesSynchronized) {
        long event;
        synchronized (this) {
            checkOpen();
            if (!sourcesSynchronized) {
                cuda.streamSynchronize(0);
            }
            for (int i = 0; i < hosts.length; i++) {
                if (bytes[i] > 0) {
                    cuda.memcpyAsync(hosts[i], devices[i], bytes[i], CudaRuntime.DEVICE_TO_HOST, stream);
                }
            }
            event = cuda.eventCreate(CudaRuntime.EVENT_DISABLE_TIMING);
            cuda.eventRecord(event, stream);
        }
        try {
            cuda.eventSynchronize(event);
        } finally {
            cuda.eventDestroy(event);
        }
    }

    /** Starts a copy to the device; the future completes once it landed (or fails with the CUDA error). */
    public CompletableFuture<Void> hostToDevice(long device, long host, long bytes) {
        long event;
        synchronized (this) {
            checkOpen();
            if (bytes > 0) {
                cuda.memcpyAsync(device, host, bytes, CudaRuntime.HOST_TO_DEVICE, stream);
            }
            event = cuda.eventCreate(CudaRuntime.EVENT_DISABLE_TIMING);
            cuda.eventRecord(event, stream);
        }
        return CompletableFuture.runAsync(() -> {
            try {
                cuda.eventSynchronize(event);
            } finally {
                cuda.eventDestroy(event);
            }
        }, waiter);
    }

    /** Waits for every copy issued, then destroys the stream. Idempotent. */
    @Override
    public void close() {
        closer.close(this::destroy);
    }

    // Under the lock the copies are issued with, so none is issued on a destroyed stream.
    private synchronized void destroy() {
        waiter.shutdown();
        try {
            long event = cuda.eventCreate(CudaRuntime.EVENT_DISABLE_TIMING);
            cuda.eventRecord(event, stream);
            cuda.eventSynchronize(event);
            cuda.eventDestroy(event);
            cuda.streamDestroy(stream);
        } catch (RuntimeException e) {
            LOG.warn("closing the copy stream failed: {}", e.getMessage());
        }
    }

    private void checkOpen() {
        if (closer.isClosed()) {
            throw new IllegalStateException("copy engine is closed");
        }
    }
}
