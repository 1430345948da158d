package io.mstar.transport.staging;

import io.mstar.transport.Tensor;

import java.util.List;
import java.util.Objects;

/**
 * The tensors of one request, for staging the tensors of many requests in one call
 * ({@link StagedBatch#stage}, {@link DeviceTransfers#stageFromDevice}).
 *
 * @param requestId the request they belong to
 * @param tensors   its tensors: {@link Tensor}s in host memory, or {@link DeviceTensor}s
 */
public record StagingRequest<T>(String requestId, List<T> tensors) {
    public StagingRequest {
        Objects.requireNonNull(requestId, "requestId");
        tensors = List.copyOf(tensors);
    }
}
