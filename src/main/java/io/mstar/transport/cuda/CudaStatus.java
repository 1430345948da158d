package io.mstar.transport.cuda;

/**
 * What the probe found.
 *
 * @param usable         a runtime loaded and sees at least one device
 * @param reason         why not, e.g. {@code cudaErrorInsufficientDriver (35): CUDA driver version is
 *                       insufficient for CUDA runtime version}; {@code ok} when usable
 * @param library        the library the binding loaded, or null
 * @param runtimeVersion e.g. 13000, or 0
 * @param devices        visible devices, or 0
 * @param runtime        the binding when a library loaded (even if no device is usable), or null
 */
public record CudaStatus(boolean usable, String reason, String library, int runtimeVersion, int devices,
                         CudaRuntime runtime) {
}
