package io.mstar.transport.crossprocess;

import io.mstar.transport.ArenaStats;
import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.exceptions.CapacityException;
import io.mstar.transport.exceptions.MstarTransportException;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.ParentWatch;
import io.mstar.transport.shm.MappedView;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * A process of a cross-process test: a producer or a consumer, talking through the built-in mailbox.
 * Prints one {@code RESULT key=value ...} line; exit 0 when everything arrived intact.
 *
 * <pre>
 *   consumer DIR ENDPOINT ENTITY EXPECTED_TENSORS DELAY_MS_PER_BATCH [KEY=VALUE environment overrides...]
 *   producer DIR ENDPOINT ENTITY CONSUMERS(a,b) TENSORS SEED MAX_MB [KEY=VALUE environment overrides...]
 * </pre>
 * A consumer expecting -1 tensors runs until the file {@code DIR/../stop-ENTITY} appears; a producer stops
 * sending when {@code DIR/../stop-ENTITY} appears, then waits for the ACKs of what it sent. A consumer prints
 * {@code READY <entity> <epoch ms>} once it can receive and {@code FIRST <epoch ms>} at its first tensor.
 * When a consumer is unavailable, a producer frees the batch and stops sending, or with the override
 * {@code NODE_REJOIN_WAIT_S=S} waits up to S seconds for it to come back and sends the same batch again. A
 * consumer with {@code NODE_TOLERATE_FAILED_FROM=P} counts tensors of producer P it cannot open (P was killed
 * and swept) as lost rather than failed; with {@code NODE_READ_DELAY_MS=M} it waits M ms before reading each
 * batch. A producer with {@code NODE_FANOUT=1} sends every tensor to all of its consumers (a fan-out send).
 * Every node exits by itself when its parent dies.
 */
public final class Node {
    private static final ArenaStats EMPTY_ARENA = new ArenaStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

    private Node() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        switch (args[0]) {
            case "consumer" -> System.exit(consumer(args));
            case "producer" -> System.exit(producer(args));
            default -> throw new IllegalArgumentException(args[0]);
        }
    }

    static TransportConfig config(String dir, String[] overrides, int from) {
        Map<String, String> env = new HashMap<>();
        env.put(TransportConfig.SHM_DIR, dir);
        env.put(TransportConfig.ARENA, "1");
        for (int i = from; i < overrides.length; i++) {
            String[] kv = overrides[i].split("=", 2);
            env.put(kv[0], kv[1]);
        }
        return TransportConfig.from(env::get);
    }

    static long crc(MemorySegment data) {
        CRC32C crc = new CRC32C();
        crc.update(data.asByteBuffer());
        return crc.getValue();
    }

    private static int consumer(String[] args) throws Exception {
        String entity = args[3];
        long expected = Long.parseLong(args[4]);
        long delayMs = Long.parseLong(args[5]);
        TransportConfig config = config(args[1], args, 6);
        AtomicLong received = new AtomicLong();
        AtomicLong corrupted = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong ackPeerGone = new AtomicLong();
        AtomicLong lost = new AtomicLong();
        String lostFrom = override(args, 6, "NODE_TOLERATE_FAILED_FROM", "");
        long readDelayMs = Long.parseLong(override(args, 6, "NODE_READ_DELAY_MS", "0"));
        Deployment deployment = Deployment.of(config, args[2], entity);
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment)) {
            System.out.println("READY " + entity + " " + System.currentTimeMillis());
            TensorChannel.Listener listener = new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    if (received.get() == 0) {
                        System.out.println("FIRST " + System.currentTimeMillis());
                    }
                    sleep(readDelayMs);
                    List<UUID> done = new ArrayList<>(batch.size());
                    for (TensorDescriptor d : batch) {
                        try (ReceivedTensor in = transport.receive(d)) {
                            long expectedCrc = Long.parseUnsignedLong(d.requestId().substring(4), 16);
                            long crc = crc(in.data());
                            if (in instanceof MappedView view) {
                                view.checkIntact(); // a slot reused while its bytes were read: refused, not used
                            }
                            if (crc != expectedCrc) {
                                corrupted.incrementAndGet();
                                System.out.println("CORRUPTED " + d);
                            }
                        } catch (MstarTransportException e) {
                            // A dead producer's segments may be swept: only its own tensors may fail so.
                            (d.producer().equals(lostFrom) ? lost : failed).incrementAndGet();
                            System.out.println("FAILED from=" + d.producer() + " " + d.uuid() + ": " + e);
                        }
                        done.add(d.uuid());
                        received.incrementAndGet();
                    }
                    sleep(delayMs);
                    try {
                        mailbox.sendAcks(from, done);
                    } catch (PeerUnavailableException e) {
                        if (ackPeerGone.getAndIncrement() == 0) { // its producer died: nobody to free them for
                            System.out.println("ACKS UNDELIVERED " + e.getMessage());
                        }
                    }
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            };
            long deadline = System.nanoTime() + 300_000_000_000L;
            Path stop = stopFile(args[1], entity);
            long nextReport = System.nanoTime() + 10_000_000_000L;
            while ((expected < 0 ? !Files.exists(stop) : received.get() < expected)
                && System.nanoTime() < deadline) {
                mailbox.receive(listener, Duration.ofMillis(20));
                if (System.nanoTime() > nextReport) {
                    System.out.println("RECEIVING received=" + received + " failed=" + failed + " lost=" + lost);
                    nextReport += 10_000_000_000L;
                }
            }
            TransportStats stats = transport.statsSummary();
            System.out.println("RESULT received=" + received + " corrupted=" + corrupted + " failed=" + failed
                + " mappedPeers=" + stats.mappedPeerSegments() + " ackPeerGone=" + ackPeerGone + " lost=" + lost);
        }
        return (expected < 0 || received.get() == expected) && corrupted.get() == 0 && failed.get() == 0 ? 0 : 1;
    }

    private static int producer(String[] args) throws Exception {
        String entity = args[3];
        String[] consumers = args[4].split(",");
        int tensors = Integer.parseInt(args[5]);
        SplittableRandom random = new SplittableRandom(Long.parseLong(args[6]));
        long maxBytes = Long.parseLong(args[7]) << 20;
        TransportConfig config = config(args[1], args, 8);
        long rejoinWaitS = Long.parseLong(override(args, 8, "NODE_REJOIN_WAIT_S", "0"));
        boolean fanOut = override(args, 8, "NODE_FANOUT", "0").equals("1");
        try (Arena scratch = Arena.ofConfined();
             TensorTransport transport = TensorTransports.create(Deployment.of(config, args[2], entity), false);
             TensorChannel mailbox = TensorTransports.mailbox(Deployment.of(config, args[2], entity), transport)) {
            // Random bytes, sliced at random offsets: every tensor gets different content.
            MemorySegment source = scratch.allocate(2 * maxBytes, 4096);
            for (long i = 0; i < source.byteSize(); i += 8) {
                source.set(ValueLayout.JAVA_LONG_UNALIGNED, i, random.nextLong());
            }
            Thread acker = Thread.ofPlatform().daemon().start(() -> {
                TensorChannel.Listener listener = new TensorChannel.Listener() {
                    @Override
                    public void descriptors(String from, List<TensorDescriptor> batch) {
                    }

                    @Override
                    public void acks(String from, List<UUID> uuids) {
                        transport.ack(from, uuids);
                    }
                };
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        mailbox.receive(listener, Duration.ofMillis(50));
                    }
                } catch (IllegalStateException closed) {
                    // the mailbox closed at the end of the run
                }
            });
            for (String consumer : consumers) {
                if (!mailbox.awaitPeer(consumer, Duration.ofSeconds(60))) {
                    System.out.println("RESULT error=no-consumer-" + consumer);
                    return 2;
                }
            }
            int sent = 0;
            int batchNo = 0;
            SplittableRandom batches = batchSizes(Long.parseLong(args[6]));
            Path stop = stopFile(args[1], entity);
            try {
                while (sent < tensors && !Files.exists(stop)) {
                    int n = Math.min(tensors - sent, 1 + batches.nextInt(8));
                    List<Tensor> batch = new ArrayList<>(n);
                    List<String> crcs = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        long size = size(random, maxBytes);
                        MemorySegment data = source.asSlice(random.nextLong(maxBytes), size);
                        batch.add(Tensor.of(DType.U8, data, size));
                        crcs.add(Long.toHexString(crc(data)));
                    }
                    List<TensorDescriptor> descriptors = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        // One request per tensor, so the consumer finds each checksum in its request id.
                        descriptors.addAll(fanOut
                            ? transport.send("crc=" + crcs.get(i), List.of(batch.get(i)), List.of(consumers))
                            : transport.send("crc=" + crcs.get(i), List.of(batch.get(i))));
                    }
                    if (fanOut) {
                        try {
                            mailbox.sendDescriptors(List.of(consumers), descriptors);
                        } catch (PeerUnavailableException e) {
                            UNAVAILABLE.incrementAndGet(); // the others got them; the gone one's share is dropped
                        }
                        sent += n;
                        continue;
                    }
                    String to = consumers[batchNo++ % consumers.length];
                    if (!deliver(mailbox, to, descriptors, rejoinWaitS)) {
                        transport.ack(descriptors.stream().map(TensorDescriptor::uuid).toList()); // nobody reads them
                        System.out.println("STOPPED consumer " + to + " is gone");
                        break;
                    }
                    sent += n;
                }
            } catch (CapacityException e) {
                System.out.println("RESULT capacity-exception=true sent=" + sent + " message=" + e.getMessage().replace(' ', '_'));
                return 3;
            }
            long deadline = System.nanoTime() + 300_000_000_000L;
            long nextReport = System.nanoTime() + 10_000_000_000L;
            while (transport.statsSummary().inFlight() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
                if (System.nanoTime() > nextReport) {
                    System.out.println("WAITING for ACKs: " + transport.statsSummary().toLogLine());
                    nextReport += 10_000_000_000L;
                }
            }
            acker.interrupt();
            TransportStats stats = transport.statsSummary();
            ArenaStats arena = stats.arena() != null ? stats.arena() : EMPTY_ARENA; // none for the file transport
            System.out.println("RESULT sent=" + sent + " inFlight=" + stats.inFlight() + " liveSlots="
                + arena.liveSlots() + " spills=" + stats.spills() + " waits=" + stats.backpressureWaits()
                + " segments=" + arena.segments() + " unknownAcks=" + stats.unknownAcks()
                + " deadConsumerReclaims=" + stats.deadConsumerReclaims() + " peerUnavailable=" + UNAVAILABLE);
            System.out.println("STATS " + stats.toLogLine());
            return stats.inFlight() == 0 && arena.liveSlots() == 0 ? 0 : 1;
        }
    }

    // Sends a batch; while its consumer is unavailable, waits up to rejoinWaitS for it to come back and
    // sends the same batch again. False when it did not come back.
    private static boolean deliver(TensorChannel mailbox, String to, List<TensorDescriptor> descriptors,
                                   long rejoinWaitS) throws InterruptedException {
        long deadline = System.nanoTime() + rejoinWaitS * 1_000_000_000L;
        while (true) {
            try {
                mailbox.sendDescriptors(to, descriptors);
                return true;
            } catch (PeerUnavailableException e) {
                UNAVAILABLE.incrementAndGet();
                long left = deadline - System.nanoTime();
                if (left <= 0 || !mailbox.awaitPeer(to, Duration.ofNanos(left))) {
                    return false;
                }
            }
        }
    }

    private static final AtomicLong UNAVAILABLE = new AtomicLong();

    // The value of a KEY=VALUE override, or the default.
    private static String override(String[] args, int from, String key, String defaultValue) {
        for (int i = from; i < args.length; i++) {
            if (args[i].startsWith(key + "=")) {
                return args[i].substring(key.length() + 1);
            }
        }
        return defaultValue;
    }

    /** The file whose appearance tells {@code entity} to stop, beside the shared-memory directory. */
    public static Path stopFile(String dir, String entity) {
        return Path.of(dir).resolveSibling(Path.of(dir).getFileName() + "-stop-" + entity);
    }

    /** How many tensors each of {@code consumers} gets from a producer with this seed (batches go round-robin). */
    static long[] expectedPerConsumer(long seed, int tensors, int consumers) {
        SplittableRandom batches = batchSizes(seed);
        long[] expected = new long[consumers];
        int sent = 0;
        int batchNo = 0;
        while (sent < tensors) {
            int n = Math.min(tensors - sent, 1 + batches.nextInt(8));
            expected[batchNo++ % consumers] += n;
            sent += n;
        }
        return expected;
    }

    // Batch sizes come from their own generator, so a test can tell each consumer how many tensors to expect.
    private static SplittableRandom batchSizes(long seed) {
        return new SplittableRandom(seed ^ 0x5DEECE66DL);
    }

    // 4 KiB to maxBytes: mostly small, some medium, one in a hundred large (past a segment, at times).
    static long size(SplittableRandom random, long maxBytes) {
        int kind = random.nextInt(100);
        double lo;
        double hi;
        if (kind < 85) {
            lo = 4 << 10;
            hi = 256 << 10;
        } else if (kind < 99) {
            lo = 256 << 10;
            hi = Math.min(8 << 20, maxBytes);
        } else {
            lo = Math.min(8 << 20, maxBytes);
            hi = maxBytes;
        }
        return (long) Math.exp(Math.log(lo) + random.nextDouble() * (Math.log(hi) - Math.log(lo)));
    }

    private static void sleep(long ms) {
        if (ms > 0) {
            try {
                Thread.sleep(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
