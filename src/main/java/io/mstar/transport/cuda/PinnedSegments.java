package io.mstar.transport.cuda;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.CudaException;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.shm.MappingListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Registers mapped segments with CUDA ({@code cudaHostRegister}) while the per-process budget
 * ({@code MSTAR_SHM_ARENA_PIN_MAX_MB}) allows, so copies between them and the device run asynchronously
 * at full speed; segments past the budget stay pageable and still work. A segment is unregistered before
 * it is unmapped, never after. Thread-safe.
 */
public final class PinnedSegments implements MappingListener {
    private static final Logger LOG = LoggerFactory.getLogger(PinnedSegments.class);
    private static final AtomicBoolean WARNED_BUDGET = new AtomicBoolean();

    private final CudaRuntime cuda;
    private final long budgetBytes;
    private final Map<Long, Long> pinned = new HashMap<>(); // address -> bytes
    private long pinnedBytes;
    private long overBudget;

    public PinnedSegments(CudaRuntime cuda, long budgetBytes) {
        this.cuda = cuda;
        this.budgetBytes = budgetBytes;
        long physical = physicalMemoryBytes();
        if (physical > 0 && budgetBytes > physical / 4 && WARNED_BUDGET.compareAndSet(false, true)) {
            LOG.warn("pinned memory budget is more than a quarter of physical memory, and it is per process: {}={}"
                    + " MiB, physicalMemory={} MiB", TransportConfig.PIN_MAX_MB, budgetBytes >> 20, physical >> 20);
        }
    }

    @Override
    public synchronized void mapped(MappedSegment segment) {
        long address = segment.memory().address();
        long bytes = segment.sizeBytes();
        if (pinned.containsKey(address)) {
            return;
        }
        if (pinnedBytes + bytes > budgetBytes) {
            overBudget++;
            LOG.debug("segment stays pageable, the pin budget is spent: segment={}, pinnedBytes={}, budgetBytes={}",
                segment.name(), pinnedBytes, budgetBytes);
            return;
        }
        try {
            cuda.hostRegister(address, bytes, CudaRuntime.HOST_REGISTER_PORTABLE); // 712 is success too
            pinned.put(address, bytes);
            pinnedBytes += bytes;
        } catch (CudaException e) {
            LOG.warn("segment stays pageable, cudaHostRegister failed: segment={}: {}", segment.name(), e.getMessage());
        }
    }

    @Override
    public synchronized void unmapping(MappedSegment segment) {
        long address = segment.memory().address();
        Long bytes = pinned.remove(address);
        if (bytes == null) {
            return;
        }
        pinnedBytes -= bytes;
        try {
            cuda.hostUnregister(address);
        } catch (CudaException e) {
            LOG.warn("cudaHostUnregister failed before unmapping: segment={}: {}", segment.name(), e.getMessage());
        }
    }

    public synchronized long pinnedBytes() {
        return pinnedBytes;
    }

    public synchronized int pinnedSegments() {
        return pinned.size();
    }

    /** Segments that stayed pageable because the budget was spent. */
    public synchronized long overBudget() {
        return overBudget;
    }

    private static long physicalMemoryBytes() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (line.startsWith("MemTotal:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) << 10;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
        return 0;
    }
}
