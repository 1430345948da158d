package io.mstar.transport.cli;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Placement;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.channel.ShmMailbox;
import io.mstar.transport.lifecycle.DirectoryEntries;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ParentWatch;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.lifecycle.ShmDirectory;
import io.mstar.transport.metrics.StatsJson;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code mstar-shm demo}: a consumer process and a producer process (child JVMs of this one) stream
 * tensors of 4 KiB to 16 MiB through the arena, then through the file transport, in a temporary
 * directory under {@code MSTAR_SHM_DIR}; prints progress, a side-by-side table per size and the
 * producer's final stats snapshot, and removes the directory.
 */
final class DemoCommand {
    private static final String ENDPOINT = "mstar-shm-demo";
    static final long[] SIZES = {4 << 10, 64 << 10, 1 << 20, 16 << 20};
    /** Default tensors per send (one request), as far as 16 MiB of source allows. */
    static final int BATCH = 8;
    /** Batches that may be un-ACKed at once, within {@link #IN_FLIGHT_BYTES}. */
    private static final int BATCHES_IN_FLIGHT = 32;
    /** At most half of the producer's arena (8 segments of 64 MiB) in flight, so the run never spills. */
    private static final long IN_FLIGHT_BYTES = 256L << 20;

    private DemoCommand() {
    }

    static int run(String[] args, PrintStream out) throws IOException, InterruptedException {
        double secondsPerSize = 1.5;
        int batch = BATCH;
        boolean json = false;
        for (int i = 0; i < args.length; i += 2) {
            if (args[i].equals("--json")) {
                json = true;
                i--;
            } else if (args[i].equals("--seconds-per-size")) {
                secondsPerSize = MstarShm.number(args, i);
            } else if (args[i].equals("--batch")) {
                batch = (int) MstarShm.number(args, i);
            } else {
                throw new MstarShm.UsageException("unknown option for demo: " + args[i]);
            }
        }
        TransportConfig config = TransportConfig.fromEnvironment();
        // The directory is locked while the demo lives, so a sweep removes it (and what its children left)
        // only after the demo and its children are gone, however they went.
        ShmDirectory.prepare(config.shmDir());
        Reclaimer.sweep(config.shmDir()); // what an earlier demo killed outright left
        OwnedFile workDir = OwnedFile.createDirectory(config.shmDir(), "mstar-demo-" + Owner.newNonce());
        Path dir = Path.of(workDir.path());
        Thread stopChildren = new Thread(() -> {
            stopChildren(System.err);
            Reclaimer.sweep(dir); // what a killed child left
            workDir.close();
        }, "mstar-demo-stop-children");
        Runtime.getRuntime().addShutdownHook(stopChildren);
        if (!json) {
            out.printf("demo: dir=%s sizes=4KiB,64KiB,1MiB,16MiB batch=%d in-flight=%d batches (at most %d MiB)"
                + " seconds-per-size=%.1f%n", dir, batch, BATCHES_IN_FLIGHT, IN_FLIGHT_BYTES >> 20, secondsPerSize);
        }
        // Children's progress only for a person; anything else they say goes to stderr under --json.
        Relay relay = new Relay(json ? System.err : out, !json && Terminal.showsProgress(out));
        Map<Long, double[]> arena;
        Map<Long, double[]> file;
        String[] stats = new String[2]; // the arena producer's snapshot: a log line, and JSON
        try {
            arena = round(dir, "arena", secondsPerSize, batch, relay, stats);
            file = round(dir, "file", secondsPerSize, batch, relay, new String[2]);
        } finally {
            deleteContents(dir);
            workDir.close();
        }
        Runtime.getRuntime().removeShutdownHook(stopChildren);
        if (arena == null || file == null) {
            return 1;
        }
        if (json) {
            out.println(json(dir, arena, file, stats[1]));
            return 0;
        }
        out.println();
        out.printf("%-6s | %-36s | %-36s | %s%n", "size", "arena: tensors/s   GB/s  p50 us  p99 us",
            "file: tensors/s   GB/s  p50 us  p99 us", "arena/file tensors/s");
        for (long size : SIZES) {
            double[] a = arena.get(size);
            double[] f = file.get(size);
            out.printf("%-6s | %10.0f %7.2f %7.0f %7.0f   | %10.0f %7.2f %7.0f %7.0f   | %.1fx%n", human(size),
                a[0], a[1], a[2], a[3], f[0], f[1], f[2], f[3], a[0] / f[0]);
        }
        out.println();
        out.println("arena producer stats: " + stats[0]);
        out.println("files left behind: " + (Files.exists(dir) ? "directory still there" : 0));
        return 0;
    }

    private static String json(Path dir, Map<Long, double[]> arena, Map<Long, double[]> file, String stats) {
        List<String> rows = new ArrayList<>();
        for (long size : SIZES) {
            rows.add(String.format(Locale.ROOT, "{\"sizeBytes\":%d,\"arena\":%s,\"file\":%s,\"arenaOverFile\":%.2f}",
                size, row(arena.get(size)), row(file.get(size)), arena.get(size)[0] / file.get(size)[0]));
        }
        return "{\"durationUnit\":" + Json.quote(StatsJson.DURATION_UNIT) + ",\"dir\":" + Json.quote(dir.toString())
            + ",\"rows\":[" + String.join(",", rows) + "],\"arenaProducerStats\":" + stats + ",\"filesLeftBehind\":"
            + (Files.exists(dir) ? 1 : 0) + "}";
    }

    private static String row(double[] r) {
        return String.format(Locale.ROOT, "{\"tensorsPerSecond\":%.0f,\"gbPerSecond\":%.3f,\"p50\":%.0f,\"p99\":%.0f}",
            r[0], r[1], r[2], r[3]);
    }

    /** Where the children's lines go: their progress lines only when {@code progress}, the rest always. */
    record Relay(PrintStream out, boolean progress) {
        void line(String mode, String line) {
            if (progress || !line.startsWith(mode + " ")) {
                out.println("  [" + mode + "] " + line);
            }
        }
    }

    /**
     * One consumer and one producer process over {@code mode} ("arena" or "file") in {@code dir}; returns,
     * per size, {tensors/s, GB/s, p50 us, p99 us}, or null when a process failed (said on the relay).
     * The producer's final stats line lands in {@code statsOut[0]}.
     */
    static Map<Long, double[]> round(Path dir, String mode, double secondsPerSize, int batch, Relay relay,
                                     String[] statsOut) throws IOException, InterruptedException {
        Process consumer = child("demo-consumer", dir.toString(), mode);
        Process producer = child("demo-producer", dir.toString(), mode, Double.toString(secondsPerSize),
            Integer.toString(batch));
        Map<Long, double[]> rows = new HashMap<>();
        try (BufferedReader lines = new BufferedReader(new InputStreamReader(producer.getInputStream()))) {
            for (String line; (line = lines.readLine()) != null; ) {
                if (line.startsWith("ROW ")) {
                    String[] f = line.substring(4).split(" ");
                    rows.put(Long.parseLong(f[0]), new double[] {Double.parseDouble(f[1]), Double.parseDouble(f[2]),
                        Double.parseDouble(f[3]), Double.parseDouble(f[4])});
                } else if (line.startsWith("STATS ")) {
                    statsOut[0] = line.substring(6);
                } else if (line.startsWith("STATSJSON ")) {
                    statsOut[1] = line.substring(10);
                } else {
                    relay.line(mode, line);
                }
            }
        }
        boolean producerOk = producer.waitFor(120, TimeUnit.SECONDS) && producer.exitValue() == 0;
        boolean consumerOk = consumer.waitFor(30, TimeUnit.SECONDS) && consumer.exitValue() == 0;
        consumer.destroyForcibly();
        producer.destroyForcibly();
        CHILDREN.clear();
        if (!producerOk || !consumerOk) {
            relay.out().println("demo round failed: mode=" + mode + " producerOk=" + producerOk + " consumerOk=" + consumerOk);
            return null;
        }
        return rows;
    }

    /** The children running now, by role, for the shutdown hook. */
    private static final Map<String, Process> CHILDREN = new ConcurrentHashMap<>();
    /** How long children get to stop on TERM before they are killed. */
    static final long STOP_GRACE_MS = 2000;

    // A SIGTERM or Ctrl-C of the demo: TERM the children, a short grace, then KILL; say what it took.
    private static void stopChildren(PrintStream out) {
        if (CHILDREN.isEmpty()) {
            return;
        }
        CHILDREN.values().forEach(Process::destroy);
        long deadline = System.nanoTime() + STOP_GRACE_MS * 1_000_000L;
        List<String> killed = new ArrayList<>();
        for (Map.Entry<String, Process> child : CHILDREN.entrySet()) {
            try {
                if (!child.getValue().waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    child.getValue().destroyForcibly();
                    killed.add(child.getKey());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        out.println("demo stopped early: sent TERM to " + CHILDREN.keySet() + (killed.isEmpty()
            ? ", all stopped within the grace" : "; KILLed after a " + STOP_GRACE_MS + " ms grace: " + killed));
    }

    private static Process child(String... args) throws IOException {
        String java = ProcessHandle.current().info().command().orElse(System.getProperty("java.home") + "/bin/java");
        List<String> command = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "--add-exports",
            "java.base/jdk.internal.misc=ALL-UNNAMED", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp", System.getProperty("java.class.path"), MstarShm.class.getName()));
        command.addAll(Arrays.asList(args));
        // stdin stays a pipe from us: the child exits when it closes (ParentWatch). The producer's output is
        // read for its rows; the consumer only speaks when something is wrong.
        ProcessBuilder builder = new ProcessBuilder(command);
        if (args[0].equals("demo-producer")) {
            builder.redirectErrorStream(true);
        } else {
            builder.redirectOutput(ProcessBuilder.Redirect.INHERIT).redirectError(ProcessBuilder.Redirect.INHERIT);
        }
        Process process = builder.start();
        CHILDREN.put(args[0].substring("demo-".length()), process);
        return process;
    }

    private static TransportConfig childConfig(String dir, String mode) {
        Map<String, String> env = new HashMap<>();
        env.put(TransportConfig.SHM_DIR, dir);
        env.put(TransportConfig.ARENA, mode.equals("arena") ? "1" : "0");
        env.put(TransportConfig.SEGMENT_MB, "64");
        env.put(TransportConfig.MAX_SEGMENTS, "8");
        return TransportConfig.from(env::get);
    }

    /** The consumer: reads each tensor in place, checks its stamp, ACKs it; stops on a zero-length batch marker. */
    static int consumer(String[] args) throws InterruptedException {
        ParentWatch.exitWhenParentDies();
        Deployment deployment = Deployment.of(childConfig(args[0], "arena"), ENDPOINT, "consumer"); // reads slots and files alike
        AtomicLong bad = new AtomicLong();
        AtomicLong done = new AtomicLong();
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment)) {
            TensorChannel.Listener listener = new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    List<UUID> acks = new ArrayList<>(batch.size());
                    for (TensorDescriptor d : batch) {
                        if (d.requestId().equals("end")) {
                            done.set(1);
                            continue;
                        }
                        try (ReceivedTensor in = transport.receive(d)) {
                            long stamp = Long.parseLong(d.requestId());
                            MemorySegment data = in.data();
                            if (data.get(ValueLayout.JAVA_LONG_UNALIGNED, 0) != stamp
                                || data.get(ValueLayout.JAVA_LONG_UNALIGNED, d.nbytes() - 8) != ~stamp) {
                                bad.incrementAndGet();
                            }
                        }
                        acks.add(d.uuid());
                    }
                    mailbox.sendAcks(from, acks);
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            };
            while (done.get() == 0) {
                mailbox.receive(listener, Duration.ofMillis(100));
            }
        }
        if (bad.get() > 0) {
            System.err.println("consumer found " + bad.get() + " corrupted tensors");
            return 1;
        }
        return 0;
    }

    /** The producer: for each size, streams tensors for a while with a window of un-ACKed ones; prints a ROW per size. */
    static int producer(String[] args) throws InterruptedException {
        ParentWatch.exitWhenParentDies();
        String mode = args[1];
        long durationNs = (long) (Double.parseDouble(args[2]) * 1e9);
        int maxBatch = Integer.parseInt(args[3]);

        Deployment deployment = Deployment.of(childConfig(args[0], mode), ENDPOINT, "producer");
        Map<UUID, Long> sentAt = new ConcurrentHashMap<>();
        AtomicReference<Semaphore> window = new AtomicReference<>();
        long[] latencies = new long[1 << 20];
        AtomicLong latencyCount = new AtomicLong();
        try (Arena scratch = Arena.ofConfined();
             TensorTransport transport = TensorTransports.create(deployment, false);
             ShmMailbox mailbox = (ShmMailbox) TensorTransports.mailbox(deployment)) {
            Thread acker = Thread.ofPlatform().daemon().start(() -> {
                TensorChannel.Listener listener = new TensorChannel.Listener() {
                    @Override
                    public void descriptors(String from, List<TensorDescriptor> batch) {
                    }

                    @Override
                    public void acks(String from, List<UUID> uuids) {
                        long now = System.nanoTime();
                        transport.ack(uuids);
                        for (UUID uuid : uuids) {
                            Long t0 = sentAt.remove(uuid);
                            if (t0 != null) {
                                long i = latencyCount.getAndIncrement();
                                if (i < latencies.length) {
                                    latencies[(int) i] = now - t0;
                                }
                            }
                        }
                        window.get().release(uuids.size());
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
            if (!mailbox.awaitPeer("consumer", Duration.ofSeconds(30))) {
                System.out.println("no consumer mailbox");
                return 1;
            }
            MemorySegment source = scratch.allocate(SIZES[SIZES.length - 1], 4096);
            source.fill((byte) 0x5A);
            long stamp = 0;
            // Warm-up: every size once, unmeasured, so the JIT has compiled the path before the first row.
            long[] schedule = new long[2 * SIZES.length];
            for (int i = 0; i < schedule.length; i++) {
                schedule[i] = SIZES[i % SIZES.length];
            }
            for (int phase = 0; phase < schedule.length; phase++) {
                long size = schedule[phase];
                boolean measured = phase >= SIZES.length;
                long phaseNs = measured ? durationNs : durationNs / 4;
                latencyCount.set(0);
                long start = System.nanoTime();
                long sent = 0;
                long nextProgress = start + 500_000_000L;
                int batchSize = (int) Math.max(1, Math.min(maxBatch, SIZES[SIZES.length - 1] / size));
                int windowTensors = (int) Math.max(batchSize, Math.min((long) batchSize * BATCHES_IN_FLIGHT,
                    IN_FLIGHT_BYTES / size));
                window.set(new Semaphore(windowTensors));
                while (System.nanoTime() - start < phaseNs) {
                    window.get().acquire(batchSize);
                    stamp++;
                    List<Tensor> batch = new ArrayList<>(batchSize);
                    for (int i = 0; i < batchSize; i++) {
                        MemorySegment data = source.asSlice(i * size, size);
                        data.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, stamp);
                        data.set(ValueLayout.JAVA_LONG_UNALIGNED, size - 8, ~stamp);
                        batch.add(Tensor.of(DType.U8, data, size));
                    }
                    long t0 = System.nanoTime();
                    List<TensorDescriptor> d = transport.send(Long.toString(stamp), batch);
                    for (TensorDescriptor sentOne : d) {
                        sentAt.put(sentOne.uuid(), t0);
                    }
                    mailbox.sendDescriptors("consumer", d);
                    sent += batchSize;
                    if (measured && System.nanoTime() > nextProgress) {
                        System.out.printf("%s %-6s %8d tensors %6.2f s%n", mode, human(size), sent, (System.nanoTime() - start) / 1e9);
                        nextProgress += 500_000_000L;
                    }
                }
                window.get().acquire(windowTensors); // every tensor of this size ACKed
                double seconds = (System.nanoTime() - start) / 1e9;
                window.get().release(windowTensors);
                if (!measured) {
                    continue;
                }
                int n = (int) Math.min(latencyCount.get(), latencies.length);
                long[] sorted = Arrays.copyOf(latencies, n);
                Arrays.sort(sorted);
                System.out.printf(Locale.ROOT, "ROW %d %.0f %.2f %.0f %.0f%n", size, sent / seconds, sent * size / seconds / 1e9,
                    sorted[n / 2] / 1e3, sorted[Math.min(n - 1, (int) (n * 0.99))] / 1e3);
            }
            mailbox.sendDescriptors("consumer", List.of(new TensorDescriptor(new UUID(0, 0), "end", "producer", DType.U8,
                new long[] {0}, 0, Placement.SPILL,
                ShmNames.spill(Namespace.of(null, ENDPOINT), "producer", "00000000", new UUID(0, 0)), 0)));
            acker.interrupt();
            TransportStats snapshot = transport.statsSummary();
            System.out.println("STATS " + snapshot.toLogLine());
            System.out.println("STATSJSON " + StatsJson.of(snapshot));
        }
        return 0;
    }

    static String human(long bytes) {
        return bytes >= 1 << 20 ? (bytes >> 20) + "MiB" : (bytes >> 10) + "KiB";
    }

    private static void deleteContents(Path dir) throws IOException {
        DirectoryEntries.deleteContents(dir);
    }
}
