package io.mstar.transport.cuda;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.CudaException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Finds and loads the CUDA runtime, and tells whether it is usable, without ever throwing.
 *
 * <p>Search order: {@code MSTAR_CUDART} when set (that path only); else the loader's {@code libcudart.so},
 * {@code .so.13}, {@code .so.12}, then the same names under {@code /usr/local/cuda/lib64}.
 */
public final class CudaProbe {
    private static final Logger LOG = LoggerFactory.getLogger(CudaProbe.class);
    private static final AtomicBoolean LOGGED = new AtomicBoolean();

    private CudaProbe() {
    }

    /** The library names tried, in order. */
    static List<String> candidates(String explicitPath) {
        if (explicitPath != null) {
            return List.of(explicitPath);
        }
        List<String> names = new ArrayList<>();
        for (String dir : new String[] {"", "/usr/local/cuda/lib64/"}) {
            for (String suffix : new String[] {"", ".13", ".12"}) {
                names.add(dir + "libcudart.so" + suffix);
            }
        }
        return names;
    }

    /** Probes with {@code config.cudartPath()}; the result is logged once per JVM. */
    public static CudaStatus probe(TransportConfig config) {
        return probe(config.cudartPath());
    }

    /** Probes the runtime at {@code explicitPath}, or searches when it is null. Never throws. */
    public static CudaStatus probe(String explicitPath) {
        CudaStatus status = examine(explicitPath);
        if (LOGGED.compareAndSet(false, true)) {
            if (status.usable()) {
                LOG.info("CUDA is usable: library={}, runtimeVersion={}, devices={}", status.library(),
                    status.runtimeVersion(), status.devices());
            } else {
                LOG.info("CUDA is not usable, tensors in device memory are refused (the host path works): {}",
                    status.reason());
            }
        }
        return status;
    }

    private static CudaStatus examine(String explicitPath) {
        JnaCudaRuntime runtime = null;
        String library = null;
        List<String> failures = new ArrayList<>();
        String bound = JnaCudaRuntime.boundTo();
        for (String candidate : bound != null ? List.of(bound) : candidates(explicitPath)) {
            try {
                runtime = JnaCudaRuntime.bind(candidate);
                library = candidate;
                break;
            } catch (UnsatisfiedLinkError | IllegalStateException e) {
                failures.add(candidate + ": " + e.getMessage());
            }
        }
        if (runtime == null) {
            return new CudaStatus(false, "no CUDA runtime library could be loaded (" + String.join("; ", failures)
                + "); set " + TransportConfig.CUDART + " to its path", null, 0, 0, null);
        }
        int version = 0;
        try {
            version = runtime.runtimeVersion();
            int devices = runtime.deviceCount();
            if (devices == 0) {
                return new CudaStatus(false, "the CUDA runtime sees no device", library, version, 0, runtime);
            }
            return new CudaStatus(true, "ok", library, version, devices, runtime);
        } catch (CudaException e) {
            return new CudaStatus(false, e.errorName() + " (" + e.code() + "): "
                + runtime.errorString(e.code()), library, version, 0, runtime);
        } catch (RuntimeException | LinkageError e) {
            return new CudaStatus(false, "the CUDA runtime failed: " + e, library, version, 0, runtime);
        }
    }
}
