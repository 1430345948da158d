package io.mstar.transport.cuda;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.staging.DeviceTensor;
import io.mstar.transport.staging.DeviceTransfers;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.zip.CRC32C;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * On a real GPU only: {@code mvn verify -Pgpu} (the default build runs the CPU stand-in and skips these,
 * saying so). Device to arena to device across two processes with checksums, and copy bandwidth
 * through pinned segments against pageable memory and a plain pinned buffer.
 */
@Tag("gpu")
class GpuTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private CudaRuntime cuda;

    @BeforeEach
    void realGpu() {
        String standin = System.getenv("MSTAR_CUDART");
        Assumptions.assumeTrue(standin == null || standin.isBlank(),
            "SKIPPED: this JVM runs the CPU stand-in; run mvn verify -Pgpu on a machine with a GPU");
        CudaStatus status = CudaProbe.probe((String) null);
        Assumptions.assumeTrue(status.usable(), "SKIPPED: no usable GPU: " + status.reason());
        cuda = status.runtime();
    }

    static long crc(MemorySegment data) {
        CRC32C crc = new CRC32C();
        crc.update(data.asByteBuffer());
        return crc.getValue();
    }

    @Test
    void deviceToArenaToDeviceAcrossTwoProcesses() throws Exception {
        ChildJvm consumer = ChildJvm.start(GpuNode.class, "consumer", shm.path().toString(), "200");
        ChildJvm producer = ChildJvm.start(GpuNode.class, "producer", shm.path().toString(), "200");
        assertEquals(0, producer.await(300), producer.output());
        assertEquals(0, consumer.await(300), consumer.output());
        assertTrue(consumer.output().contains("RESULT received=200 corrupted=0"), consumer.output());
        System.out.println(producer.output() + consumer.output());
    }

    /** Prints GB/s; the targets (0.9x plain pinned, 2x pageable from 16 MiB) are read, not asserted. */
    @Test
    void copyBandwidthThroughPinnedSegments() {
        System.out.println("size     | D2H pinned segment | D2H pageable | D2H plain pinned | H2D pinned segment | H2D pageable | H2D plain pinned  (GB/s)");
        for (long size : new long[] {1 << 20, 16 << 20, 256L << 20}) {
            long device = cuda.malloc(size);
            try (Arena arena = Arena.ofShared();
                 MappedSegment segment = MappedSegment.create(shm.path(), "bandwidth", size)) {
                MemorySegment pageable = arena.allocate(size, 4096);
                MemorySegment plain = arena.allocate(size, 4096);
                cuda.hostRegister(segment.memory().address(), size, CudaRuntime.HOST_REGISTER_PORTABLE);
                cuda.hostRegister(plain.address(), size, CudaRuntime.HOST_REGISTER_PORTABLE);
                try (CopyEngine engine = new CopyEngine(cuda)) {
                    double[] gbps = new double[6];
                    long[] hosts = {segment.memory().address(), pageable.address(), plain.address()};
                    for (int h = 0; h < 3; h++) {
                        int hh = h;
                        gbps[h] = rate(size, () -> engine.deviceToHost(new long[] {hosts[hh]}, new long[] {device},
                            new long[] {size}, true));
                        gbps[3 + h] = rate(size, () -> engine.hostToDevice(device, hosts[hh], size).join());
                    }
                    System.out.printf("%-8s | %18.2f | %12.2f | %16.2f | %18.2f | %12.2f | %16.2f%n", (size >> 20) + "MiB",
                        gbps[0], gbps[1], gbps[2], gbps[3], gbps[4], gbps[5]);
                } finally {
                    cuda.hostUnregister(segment.memory().address());
                    cuda.hostUnregister(plain.address());
                }
            } finally {
                cuda.free(device);
            }
        }
    }

    // Median GB/s of 9 timed copies after 2 warm-ups.
    private static double rate(long size, Runnable copy) {
        copy.run();
        copy.run();
        double[] samples = new double[9];
        for (int i = 0; i < samples.length; i++) {
            long start = System.nanoTime();
            copy.run();
            samples[i] = size / ((System.nanoTime() - start) / 1e9) / 1e9;
        }
        Arrays.sort(samples);
        return samples[samples.length / 2];
    }

    /** A GPU process: producer sends device tensors, consumer copies them to its device and checks them. */
    public static final class GpuNode {
        public static void main(String[] args) throws Exception {
            String role = args[0];
            int tensors = Integer.parseInt(args[2]);
            TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, args[1],
                TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "64", TransportConfig.MAX_SEGMENTS, "8")::get);
            CudaRuntime cuda = CudaProbe.probe(config).runtime();
            try (CopyEngine engine = new CopyEngine(cuda);
                 TensorTransport transport = TensorTransports.create(Deployment.of(config, "gpu-test", role), false);
                 TensorChannel mailbox = TensorTransports.mailbox(Deployment.of(config, "gpu-test", role));
                 Arena host = Arena.ofConfined()) {
                long maxBytes = 32 << 20;
                long device = cuda.malloc(maxBytes);
                MemorySegment staging = host.allocate(maxBytes, 4096);
                if (role.equals("producer")) {
                    mailbox.awaitPeer("consumer", Duration.ofSeconds(60));
                    SplittableRandom random = new SplittableRandom(9);
                    List<UUID> pending = new ArrayList<>();
                    for (int i = 0; i < tensors; i++) {
                        long size = 4096L << random.nextInt(14); // 4 KiB .. 32 MiB
                        for (long b = 0; b < size; b += 8) {
                            staging.set(ValueLayout.JAVA_LONG_UNALIGNED, b, random.nextLong());
                        }
                        long expected = crc(staging.asSlice(0, size));
                        engine.hostToDevice(device, staging.address(), size).join();
                        List<TensorDescriptor> d = transport.capability(DeviceTransfers.class).orElseThrow().sendFromDevice(Long.toHexString(expected),
                            List.of(new DeviceTensor(DType.U8, new long[] {size}, device)));
                        mailbox.sendDescriptors("consumer", d);
                        pending.add(d.getFirst().uuid());
                    }
                    while (transport.statsSummary().inFlight() > 0) {
                        mailbox.receive(new TensorChannel.Listener() {
                            @Override
                            public void descriptors(String from, List<TensorDescriptor> b) {
                            }

                            @Override
                            public void acks(String from, List<UUID> uuids) {
                                transport.ack(uuids);
                            }
                        }, Duration.ofMillis(100));
                    }
                    System.out.println("RESULT sent=" + tensors + " " + transport.statsSummary().toLogLine());
                } else {
                    long[] received = new long[2];
                    while (received[0] < tensors) {
                        mailbox.receive(new TensorChannel.Listener() {
                            @Override
                            public void descriptors(String from, List<TensorDescriptor> batch) {
                                for (TensorDescriptor d : batch) {
                                    transport.capability(DeviceTransfers.class).orElseThrow().copyToDevice(d, device).join();
                                    MemorySegment back = staging.asSlice(0, d.nbytes());
                                    engine.deviceToHost(new long[] {back.address()}, new long[] {device},
                                        new long[] {d.nbytes()}, true);
                                    if (crc(back) != Long.parseUnsignedLong(d.requestId(), 16)) {
                                        received[1]++;
                                    }
                                    received[0]++;
                                    mailbox.sendAcks(from, List.of(d.uuid()));
                                }
                            }

                            @Override
                            public void acks(String from, List<UUID> uuids) {
                            }
                        }, Duration.ofMillis(100));
                    }
                    System.out.println("RESULT received=" + received[0] + " corrupted=" + received[1]);
                }
                cuda.free(device);
            }
        }
    }
}
