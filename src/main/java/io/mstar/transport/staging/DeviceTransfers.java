package io.mstar.transport.staging;

import io.mstar.transport.TensorDescriptor;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The device path of a transport that carries tensors living in GPU memory (the arena does; ask with
 * {@code transport.capability(DeviceTransfers.class)}). The first call probes CUDA; where it is not usable, every
 * method throws {@link IllegalStateException} with the probe's reason. See {@code docs/gpu.md}.
 */
public interface DeviceTransfers {
    /**
     * Sends tensors that live in GPU memory: their device-to-host copies run on the transport's copy
     * stream straight into the reserved slots, with one host wait for the whole batch (after one wait for
     * the legacy default stream, whose writes the copies must see), and the descriptors are returned only
     * after every copy has landed. A failure frees the batch's slots.
     *
     * @throws IllegalStateException when CUDA is not usable here (the message gives the probe's reason)
     */
    List<TensorDescriptor> sendFromDevice(String requestId, List<DeviceTensor> tensors);

    /**
     * Stages device tensors of many requests with one host wait for all their copies (where
     * {@link #sendFromDevice} per request would wait once per request). Before copying, it waits once for
     * the legacy default stream, so that what kernels wrote there is what is copied; a caller that has
     * already synchronised its streams passes {@code sourcesSynchronized} to skip that wait.
     *
     * @throws IllegalStateException when CUDA is not usable here
     */
    StagedBatch stageFromDevice(List<StagingRequest<DeviceTensor>> requests, boolean sourcesSynchronized);

    /**
     * Copies a received tensor into device memory on the copy stream. The future completes when the copy
     * has landed; ACK the tensor only then, since the producer reuses the slot after the ACK.
     *
     * @throws IllegalStateException when CUDA is not usable here, with the probe's reason
     */
    CompletableFuture<TensorDescriptor> copyToDevice(TensorDescriptor descriptor, long devicePointer);
}
