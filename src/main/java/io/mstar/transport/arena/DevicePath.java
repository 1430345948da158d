package io.mstar.transport.arena;

import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.cuda.CopyEngine;
import io.mstar.transport.cuda.CudaProbe;
import io.mstar.transport.cuda.CudaStatus;
import io.mstar.transport.cuda.PinnedSegments;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.shm.PeerSegments;
import io.mstar.transport.staging.DeviceTensor;
import io.mstar.transport.staging.DeviceTransfers;
import io.mstar.transport.staging.StagedBatch;
import io.mstar.transport.staging.StagingRequest;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * The device path of one arena transport: device-to-host copies straight into reserved slots with one
 * host wait per batch, host-to-device copies of received tensors gated by their copy's event. The first
 * call probes CUDA; when it is usable this creates the copy stream and, with
 * {@value TransportConfig#PIN}=1, registers every mapped segment (own and peers', now and later) within
 * the pin budget, unregistering each before it is unmapped. Thread-safe.
 */
final class DevicePath implements DeviceTransfers {
    private final TransportConfig config;
    private final SegmentedArena arena;
    private final PeerSegments peers;
    private final SlotWriter writer;
    private final Function<TensorDescriptor, ReceivedTensor> receive;
    private final Runnable checkOpen;
    private CudaStatus cudaStatus;   // guarded by this; null until the first device call
    private CopyEngine copyEngine;   // guarded by this
    private PinnedSegments pinned;   // guarded by this

    /**
     * @param receive   opens a received tensor (the transport's receive, which counts it)
     * @param checkOpen throws once the transport is closed
     */
    DevicePath(TransportConfig config, SegmentedArena arena, PeerSegments peers, SlotWriter writer,
               Function<TensorDescriptor, ReceivedTensor> receive, Runnable checkOpen) {
        this.config = config;
        this.arena = arena;
        this.peers = peers;
        this.writer = writer;
        this.receive = receive;
        this.checkOpen = checkOpen;
    }

    @Override
    public List<TensorDescriptor> sendFromDevice(String requestId, List<DeviceTensor> tensors) {
        return stageFromDevice(List.of(new StagingRequest<>(requestId, tensors)), false).descriptors().getFirst();
    }

    @Override
    public StagedBatch stageFromDevice(List<StagingRequest<DeviceTensor>> requests, boolean sourcesSynchronized) {
        checkOpen.run();
        CopyEngine engine = copyEngine();
        int n = requests.stream().mapToInt(r -> r.tensors().size()).sum();
        List<UUID> uuids = new ArrayList<>(n);
        long[] slots = new long[n];
        long[] hosts = new long[n];
        long[] devices = new long[n];
        long[] bytes = new long[n];
        boolean ok = false;
        try {
            int i = 0;
            for (StagingRequest<DeviceTensor> r : requests) {
                for (DeviceTensor t : r.tensors()) {
                    UUID uuid = Owner.newUuid();
                    uuids.add(uuid);
                    bytes[i] = t.nbytes();
                    devices[i] = t.devicePointer();
                    slots[i] = writer.reserve(uuid.getMostSignificantBits(), uuid.getLeastSignificantBits(), bytes[i]);
                    if (slots[i] != SegmentedArena.FULL) {
                        hosts[i] = writer.address(slots[i]);
                    }
                    i++;
                }
            }
            engine.deviceToHost(inArena(hosts, slots), inArena(devices, slots), inArena(bytes, slots), sourcesSynchronized);
            List<List<TensorDescriptor>> perRequest = new ArrayList<>(requests.size());
            i = 0;
            for (StagingRequest<DeviceTensor> r : requests) {
                List<TensorDescriptor> sent = new ArrayList<>(r.tensors().size());
                for (DeviceTensor t : r.tensors()) {
                    sent.add(slots[i] == SegmentedArena.FULL
                        ? spill(engine, r.requestId(), t, uuids.get(i))
                        : writer.describe(uuids.get(i), r.requestId(), t.dtype(), t.shape(), bytes[i], slots[i]));
                    i++;
                }
                perRequest.add(sent);
            }
            ok = true;
            return StagedBatch.of(perRequest);
        } finally {
            if (!ok) {
                writer.releaseAll(uuids);
            }
        }
    }

    // The entries of `values` whose slot is in the arena.
    private static long[] inArena(long[] values, long[] slots) {
        int count = 0;
        for (long slot : slots) {
            count += slot != SegmentedArena.FULL ? 1 : 0;
        }
        long[] picked = new long[count];
        for (int i = 0, j = 0; i < slots.length; i++) {
            if (slots[i] != SegmentedArena.FULL) {
                picked[j++] = values[i];
            }
        }
        return picked;
    }

    // The spill path of a device tensor: staged through host memory, then written to its file.
    private TensorDescriptor spill(CopyEngine engine, String requestId, DeviceTensor t, UUID uuid) {
        try (Arena staging = Arena.ofConfined()) {
            MemorySegment host = staging.allocate(Math.max(1, t.nbytes()), 4096).asSlice(0, t.nbytes());
            // The batch's copies already waited for the default stream.
            engine.deviceToHost(new long[] {host.address()}, new long[] {t.devicePointer()}, new long[] {t.nbytes()}, true);
            return writer.spill(requestId, new Tensor(t.dtype(), t.shape(), host), uuid);
        }
    }

    @Override
    public CompletableFuture<TensorDescriptor> copyToDevice(TensorDescriptor d, long devicePointer) {
        checkOpen.run();
        CopyEngine engine = copyEngine();
        ReceivedTensor view = receive.apply(d);
        try {
            MemorySegment data = view.data();
            if (!data.isNative()) {
                // A spill file read into the heap: stage it in native memory and copy synchronously.
                try (Arena staging = Arena.ofConfined()) {
                    MemorySegment host = staging.allocate(Math.max(1, d.nbytes()), 4096);
                    MemorySegment.copy(data, 0, host, 0, d.nbytes());
                    engine.hostToDevice(devicePointer, host.address(), d.nbytes()).join();
                }
                view.close();
                return CompletableFuture.completedFuture(d);
            }
            // The view holds the mapping until the copy's event completed.
            return engine.hostToDevice(devicePointer, data.address(), d.nbytes())
                .whenComplete((ignored, failure) -> view.close())
                .thenApply(ignored -> d);
        } catch (RuntimeException e) {
            view.close();
            throw e;
        }
    }

    // Probes CUDA on the first device call; afterwards the copy stream, or the probe's reason as an exception.
    private synchronized CopyEngine copyEngine() {
        if (cudaStatus == null) {
            cudaStatus = CudaProbe.probe(config);
            if (cudaStatus.usable()) {
                copyEngine = new CopyEngine(cudaStatus.runtime());
                if (config.pin()) {
                    pinned = new PinnedSegments(cudaStatus.runtime(), config.pinMaxMb() << 20);
                    arena.mappingListener(pinned);
                    peers.mappingListener(pinned);
                }
            }
        }
        if (copyEngine == null) {
            throw new IllegalStateException("device tensors need a usable CUDA runtime: " + cudaStatus.reason());
        }
        return copyEngine;
    }

    synchronized long pinnedBytes() {
        return pinned == null ? 0 : pinned.pinnedBytes();
    }

    synchronized int pinnedSegments() {
        return pinned == null ? 0 : pinned.pinnedSegments();
    }

    /** {@code not used yet}, or the probe's verdict. */
    synchronized String cudaSummary() {
        return cudaStatus == null ? "not used yet" : cudaStatus.reason();
    }

    /** Waits for every pending copy, so that no copy outlives the mappings. */
    synchronized void close() {
        if (copyEngine != null) {
            copyEngine.close();
        }
    }
}
