package io.mstar.transport.conformance;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.conformance.Pairing.Language;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.PythonChild;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * One catalog of promises, run with every pairing of the two endpoints (JVM→JVM, JVM→Python, Python→JVM,
 * Python→Python), as Arrow's integration tests run every pair of implementations: each scenario starts real
 * processes of the conformance worker ({@link ConformanceWorker} and its Python mirror, {@code python -m
 * mstar_transport.conformance}, which take the same command lines and print the same lines) on one shared-memory
 * directory, and checks what they print and what they leave. A pairing that cannot keep a promise fails; the only
 * skip is a build without the Python environment, and under {@code CI=true} that fails too.
 *
 * <p>The promises, from docs/user-guide.md and the design's failure table: exactly one outcome per post that
 * returned, none for one that raised; never the wrong bytes; a typed error and the endpoint serving on; nothing
 * left in the directory.
 */
@Tag("conformance")
@Timeout(value = 150, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class ConformanceMatrixTest {
    private static final String DEPLOYMENT = "ipc:///tmp/mstar-conformance";
    private static final String PRODUCER = "producer";
    private static final String CONSUMER = "consumer";
    /** How long a worker may take to exit once it should: long enough for a loaded 2-core machine, never a hang. */
    private static final long EXIT_S = 60;
    private static final List<String> HOSTILE_KINDS = List.of("directory", "symlink", "fifo");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private final List<Worker> workers = new ArrayList<>();
    private final List<Path> planted = new ArrayList<>();

    // ---- the scenarios, in priority order ----

    /**
     * A checked stream of 2,000 tensors of 4 KiB, 64 KiB and 1 MiB: every post is told DELIVERED exactly once, the
     * consumer finds every word of every tensor as the producer wrote it, and once both have closed nothing of
     * theirs is left in the directory (no sweep).
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aCheckedStreamIsDeliveredIntact(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 2000, "plain");
        Worker producer = producer(pairing.producer, CONSUMER, 2000, 1, 32, 0);
        assertExited(producer, consumer);
        assertToldOnce(producer, 2000);
        assertEquals(2000, producer.number("delivered"), describe(producer, consumer));
        assertReceivedIntact(consumer, 2000, producer);
        assertNothingLeft(false);
    }

    /**
     * A handler that raises on every 10th tensor (an AssertionError in Java, an exception in Python), the application
     * receiving again; the producer keeps 8 in flight and posts 4,000: every outcome is told within 10 s of the last
     * post, all DELIVERED (a tensor whose handler raised is done with), no window ever stalls.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aHandlerThatRaisesLosesNoOutcome(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 4000, "raise:10");
        Worker producer = producer(pairing.producer, CONSUMER, 4000, 2, 8, 4096);
        assertExited(producer, consumer);
        assertEquals("false", producer.result().get("stalled"), "a window stalled: " + describe(producer, consumer));
        assertToldOnce(producer, 4000);
        assertEquals(4000, producer.number("delivered"), describe(producer, consumer));
        long settleMs = producer.number("settleMs");
        assertTrue(settleMs >= 0 && settleMs <= 10_000, "every outcome within 10 s of the last post: settleMs="
            + settleMs + "\n" + describe(producer, consumer));
        assertReceivedIntact(consumer, 4000, producer);
        assertEquals(400, consumer.number("raised"), describe(producer, consumer));
        assertNothingLeft(false);
    }

    /**
     * A consumer SIGKILLed mid-stream and restarted under the same entity while the producer posts on: every post is
     * told exactly once, the lost ones CONSUMER_DIED (or REFUSED while no consumer ran), none DELIVERED twice; the
     * restarted consumer gets the later tensors intact.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aConsumerKilledAndRestartedMidStream(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        int count = 3000;
        Worker first = consumer(pairing.consumer, CONSUMER, 1_000_000, "plain");
        Worker producer = producer(pairing.producer, CONSUMER, count, 3, 8, 4096, "--pace-ms", "2", "--stop-last",
            "--wait", "15");
        first.awaitOutput("PROGRESS", 60); // 1,000 received
        first.kill();
        Worker second = consumer(pairing.consumer, CONSUMER, 1_000_000, "plain");
        assertExited(producer, second);
        assertToldOnce(producer, count);
        Map<String, String> failures = failureCounts(producer);
        assertTrue(producer.number("failed") > 0 && Set.of("CONSUMER_DIED", "REFUSED").containsAll(failures.keySet()),
            "the killed consumer's tensors CONSUMER_DIED (REFUSED while none ran), nothing else: "
                + describe(producer, first, second));
        assertTrue(second.number("received") > 0, "the restarted consumer got the later tensors: "
            + describe(producer, first, second));
        assertEquals(0, second.number("bad"), describe(producer, second));
        assertEquals(0, second.number("duplicates"), describe(producer, second));
        assertNothingLeft(true); // the killed incarnation's files go at the next sweep
    }

    /**
     * A producer SIGKILLed mid-stream and restarted under the same entity: its successor's 500 tensors are all
     * DELIVERED intact, and once the successor and the consumer have exited nothing is left in the directory with no
     * sweep by the test (for Python→Python: a deployment of Python workers only, where no JVM sweeps).
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aProducerKilledAndRestartedLeavesNothing(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 1_000_000, "plain");
        Worker first = producer(pairing.producer, CONSUMER, 1_000_000, 4, 8, 65536);
        consumer.awaitOutput("PROGRESS", 60); // 1,000 received
        first.kill();
        Worker second = producer(pairing.producer, CONSUMER, 500, 5, 8, 4096, "--first-seq", "1000000",
            "--stop-last");
        assertExited(second, consumer);
        assertToldOnce(second, 500);
        assertEquals(500, second.number("delivered"), describe(second, consumer));
        assertEquals(0, consumer.number("bad"), describe(second, consumer));
        assertEquals(0, consumer.number("duplicates"), describe(second, consumer));
        assertNothingLeft(false);
    }

    /**
     * A handler that keeps each tensor and releases it after the next: every tensor's bytes are still its own at the
     * release, every post is DELIVERED once, and no refusal or ACK arrives for a tensor already told.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void keptTensorsAreDeliveredAtTheirRelease(Pairing pairing) throws Exception {
        keepScenario(pairing, "keep");
    }

    /**
     * A handler that keeps each tensor and raises on every 10th after keeping it: the kept tensor is ACKed only at
     * its release (before that its slot is not reused: its bytes are checked again at the release), every post is
     * DELIVERED once, and no stray refusal follows.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void keptThenRaisedTensorsAreDeliveredAtTheirRelease(Pairing pairing) throws Exception {
        keepScenario(pairing, "keep-raise:10");
    }

    private void keepScenario(Pairing pairing, String mode) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 2000, mode);
        Worker producer = producer(pairing.producer, CONSUMER, 2000, 6, 8, 4096);
        assertExited(producer, consumer);
        assertToldOnce(producer, 2000);
        assertEquals("{}", producer.result().get("failures"), describe(producer, consumer));
        assertEquals(0, producer.number("unknownAcks"), "a stray ACK or refusal after the outcome: "
            + describe(producer, consumer));
        assertReceivedIntact(consumer, 2000, producer);
        assertNothingLeft(false);
    }

    /**
     * A consumer that closes its endpoint from inside the handler of the tensor named {@code stop} (a poison pill):
     * that tensor and every one before it is told DELIVERED, none CONSUMER_DIED.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void closingInsideTheStopHandlerDeliversTheStopTensor(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 1_000_000, "close-on-stop");
        Worker producer = producer(pairing.producer, CONSUMER, 200, 7, 8, 4096, "--stop-last");
        assertExited(producer, consumer);
        assertToldOnce(producer, 200);
        assertEquals("{}", producer.result().get("failures"), describe(producer, consumer));
        assertEquals(200, consumer.number("received"), describe(producer, consumer));
        assertEquals(0, consumer.number("bad"), describe(producer, consumer));
        assertNothingLeft(false);
    }

    /**
     * A consumer that stops reading after 50 tensors but stays alive: the producer's window fills, and its
     * {@code close()} tells every post still in flight CLOSED, exactly once; the 50 read are DELIVERED.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void closeTellsEveryPostInFlightClosed(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 1_000_000, "stop-after:50");
        Worker producer = producer(pairing.producer, CONSUMER, 200, 8, 16, 4096, "--wait", "3");
        assertEquals(1, producer.await(EXIT_S), "the producer could not deliver all: " + describe(producer));
        long posted = producer.number("posted");
        assertToldOnce(producer, posted);
        assertEquals(50, producer.number("delivered"), describe(producer, consumer));
        assertEquals("{CLOSED=" + (posted - 50) + "}", producer.result().get("failures"), describe(producer, consumer));
        consumer.terminate();
        assertNothingLeft(true);
    }

    /**
     * One tensor sent to two consumers, one of each language: the first (the pairing's consumer) handles and ACKs
     * it, then the second, alive but not reading, is SIGKILLed: the tensor is told PARTIAL, once.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aFanOutWhoseLastShareDiesIsToldPartial(Pairing pairing) throws Exception {
        requireEnvironment(Pairing.PYTHON_TO_PYTHON); // one consumer of each language, whatever the pairing
        Worker reader = consumer(pairing.consumer, "reader", 1, "plain", "--idle", "5");
        Worker stalled = consumer(pairing.consumer.other(), "stalled", 1, "stop-after:0");
        stalled.awaitOutput("PROGRESS", 30);
        Worker producer = producer(pairing.producer, "reader,stalled", 1, 9, 1, 4096, "--wait", "20");
        assertEquals(0, reader.await(EXIT_S), describe(producer, reader));
        assertEquals(1, reader.number("received"), describe(producer, reader));
        stalled.kill();
        producer.await(EXIT_S);
        assertToldOnce(producer, 1);
        assertEquals("{PARTIAL=1}", producer.result().get("failures"), describe(producer, reader, stalled));
        assertNothingLeft(true);
    }

    /**
     * Two threads posting on one producer endpoint, 2,000 tensors: no tensor is handed over twice, every post that
     * returned is told exactly once and DELIVERED (a post refused with the language's documented error is never
     * told), and the consumer gets exactly the delivered ones, intact.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void twoThreadsPostingOnOneEndpoint(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 2000, "plain", "--idle", "5");
        Worker producer = producer(pairing.producer, CONSUMER, 2000, 10, 16, 4096, "--threads", "2");
        producer.await(EXIT_S);
        consumer.await(EXIT_S);
        long posted = producer.number("posted");
        assertEquals(2000, posted + producer.number("raised"), describe(producer, consumer));
        assertToldOnce(producer, posted);
        assertEquals(posted, producer.number("delivered"), describe(producer, consumer));
        assertEquals(0, consumer.number("duplicates"), "a tensor handed over twice: " + describe(producer, consumer));
        assertEquals(0, consumer.number("bad"), describe(producer, consumer));
        assertEquals(posted, consumer.number("received"), describe(producer, consumer));
        assertNothingLeft(false);
    }

    /**
     * A directory, a symlink and a FIFO at the mailbox name of an entity the producer posts to: the post is told
     * REFUSED (never hangs, never throws something else), and the producer serves on: its next 300 tensors to a
     * live consumer are DELIVERED. Each kind is checked, and reported, on its own.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aHostileFileAtAPeersMailboxIsRefused(Pairing pairing) {
        requireEnvironment(pairing);
        assertAll(HOSTILE_KINDS.stream().map(kind -> () -> {
            try {
                Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "5");
                Worker producer = producer(pairing.producer, CONSUMER, 300, 11, 8, 4096, "--first-to", "ghost",
                    "--pause-ms", "1000");
                producer.awaitOutput("READY", 60);
                // planted once both have started: a JVM's start-up sweep removes a planted link or FIFO
                plant(kind, ShmNames.mailbox(namespace(), "ghost"));
                assertExited(producer, consumer);
                String what = kind + " at the peer's mailbox name: " + describe(producer, consumer);
                assertEquals(301, producer.number("posted"), "the post to it raised instead of telling REFUSED: "
                    + what);
                assertToldOnce(producer, 301);
                assertEquals("{REFUSED=1}", producer.result().get("failures"), what);
                assertEquals(300, producer.number("delivered"), what);
                assertReceivedIntact(consumer, 300, producer);
            } finally {
                stopWorkers();
            }
            assertNothingLeft(false);
        }));
    }

    /**
     * A directory, a symlink and a FIFO at a consumer's own mailbox name: opening its endpoint fails at once with the
     * language's entity-in-use error (EntityInUseException, EntityInUseError), or the endpoint removes the planted
     * link or FIFO (never following or opening it) and serves; it never hangs, never fails with another error and
     * never writes through the link. Each kind is checked, and reported, on its own.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aHostileFileAtItsOwnMailboxFailsTheOpenOrIsRemoved(Pairing pairing) {
        requireEnvironment(pairing);
        assertAll(HOSTILE_KINDS.stream().map(kind -> () -> {
            Path target = plant(kind, ShmNames.mailbox(namespace(), CONSUMER));
            try {
                Worker consumer = Worker.start(pairing.consumer, env(), "consume", DEPLOYMENT, CONSUMER, "10", "plain",
                    "--idle", "1");
                workers.add(consumer);
                int rc = consumer.await(30);
                String what = kind + " at its own mailbox name: " + describe(consumer);
                if (consumer.output().contains("OPEN-FAILED")) {
                    assertTrue(consumer.output().contains("OPEN-FAILED kind=ENTITY_IN_USE"), what);
                    assertEquals(ConformanceWorker.OPEN_FAILED_EXIT, rc, what);
                } else {
                    assertTrue(!kind.equals("directory") && consumer.output().contains("RESULT received=0"), what);
                }
                if (target != null) {
                    assertEquals(0, Files.size(target), "written through the link: " + what);
                }
            } finally {
                stopWorkers();
            }
            assertNothingLeft(false);
        }));
    }

    /**
     * The producer's segment truncated under a slow reader (a neighbour's bug or malice): the reader gets a typed
     * error for each tensor it can no longer read and serves on, never SIGBUS; it never sees wrong bytes, and every
     * post is told exactly once.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aSegmentTruncatedUnderAReaderIsATypedError(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 40, "slow:100", "--idle", "5");
        Worker producer = producer(pairing.producer, CONSUMER, 40, 12, 64, 65536, "--wait", "20");
        producer.awaitOutput("READY", 60);
        Thread.sleep(1000); // the reader has mapped the segment and handled about ten
        try (var entries = Files.list(shm.path())) {
            for (Path segment : entries.filter(p -> p.getFileName().toString().contains("_arena_" + PRODUCER + "_"))
                .toList()) {
                try (FileChannel channel = FileChannel.open(segment, StandardOpenOption.WRITE)) {
                    channel.truncate(4096);
                }
            }
        }
        int consumerRc = consumer.await(EXIT_S);
        assertTrue(consumerRc == 0 || consumerRc == 1, "the reader died (exit " + consumerRc + "): "
            + describe(producer, consumer));
        int producerRc = producer.await(EXIT_S);
        assertTrue(producerRc == 0 || producerRc == 1, "the producer died (exit " + producerRc + "): "
            + describe(producer, consumer));
        assertToldOnce(producer, 40);
        assertEquals(0, consumer.number("bad"), describe(producer, consumer));
        assertTrue(consumer.number("received") < 40, "the truncation came too late to test anything: "
            + describe(producer, consumer));
        assertNothingLeft(true);
    }

    // ---- processes ----

    private Map<String, String> env() {
        return Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "16", TransportConfig.MAX_SEGMENTS, "8", "PYTHONUNBUFFERED", "1");
    }

    /** A consumer, started and READY. */
    private Worker consumer(Language language, String entity, int count, String mode, String... options)
        throws Exception {
        List<String> args = new ArrayList<>(List.of("consume", DEPLOYMENT, entity, Integer.toString(count), mode));
        args.addAll(List.of(options));
        Worker worker = Worker.start(language, env(), args.toArray(String[]::new));
        workers.add(worker);
        worker.awaitOutput("READY", 60);
        return worker;
    }

    private Worker producer(Language language, String to, int count, long seed, int window, long size,
                            String... options) throws Exception {
        List<String> args = new ArrayList<>(List.of("produce", DEPLOYMENT, PRODUCER, to, Integer.toString(count),
            Long.toString(seed), Integer.toString(window)));
        if (size > 0) {
            args.add(Long.toString(size));
        }
        args.addAll(List.of(options));
        Worker worker = Worker.start(language, env(), args.toArray(String[]::new));
        workers.add(worker);
        return worker;
    }

    /** Skips where the build made no Python environment; fails instead under CI, where a skip would hide the matrix. */
    private static void requireEnvironment(Pairing pairing) {
        if (!pairing.usesPython()) {
            return;
        }
        if ("true".equalsIgnoreCase(System.getenv("CI")) && !Files.isExecutable(PythonChild.VENV_PYTHON)) {
            fail("CI=true and no " + PythonChild.VENV_PYTHON + ": the conformance matrix needs the Python package"
                + " (python/venv.sh says what to install)");
        }
        PythonChild.assumeVenv();
    }

    private static Namespace namespace() {
        return Namespace.of(null, DEPLOYMENT);
    }

    /** Plants a hostile entry at {@code name}; returns a symlink's target (an empty file elsewhere), else null. */
    private Path plant(String kind, String name) throws Exception {
        Path at = shm.path().resolve(name);
        Path target = null;
        switch (kind) {
            case "directory" -> Files.createDirectory(at);
            case "symlink" -> {
                target = Files.createTempFile("mstar-conformance-", ".target");
                planted.add(target);
                Files.createSymbolicLink(at, target);
            }
            case "fifo" -> assertEquals(0, new ProcessBuilder("mkfifo", "-m", "600", at.toString()).start().waitFor());
            default -> throw new IllegalArgumentException(kind);
        }
        planted.add(at);
        return target;
    }

    private void unplant() throws IOException {
        for (Path p : planted) {
            Files.deleteIfExists(p);
        }
        planted.clear();
    }

    @AfterEach
    void afterEach() throws Exception {
        stopWorkers();
        Reclaimer.sweep(shm.path()); // what a failed scenario's killed workers left; the scenario has judged already
    }

    /**
     * Kills the workers still running (a scenario that failed), deletes their logs and the planted entries; sweeps
     * only where it killed one, so that a later "nothing left" check still sees what exiting workers left.
     */
    private void stopWorkers() throws Exception {
        boolean killed = false;
        for (Worker worker : workers) {
            if (worker.process().isAlive()) {
                worker.kill();
                killed = true;
            }
            worker.deleteLog();
        }
        workers.clear();
        unplant();
        if (killed) {
            Reclaimer.sweep(shm.path());
        }
    }

    // ---- what the scenarios check ----

    private static void assertExited(Worker... all) throws Exception {
        for (Worker worker : all) {
            int rc = worker.await(EXIT_S);
            assertTrue(rc == 0 || rc == 1, worker + " died (exit " + rc + "):\n" + worker.outputQuietly());
        }
    }

    /** Exactly one outcome per post that returned, none for a post that raised, none for anything else. */
    private static void assertToldOnce(Worker producer, long posted) throws IOException {
        String what = describe(producer);
        assertEquals(posted, producer.number("posted"), "posts that returned: " + what);
        assertEquals(0, producer.number("duplicates"), "outcomes told twice: " + what);
        assertEquals(0, producer.number("unknown"), "outcomes for posts that raised or never were: " + what);
        assertEquals(posted, producer.number("told"), "outcomes told: " + what);
    }

    private static void assertReceivedIntact(Worker consumer, long count, Worker producer) throws IOException {
        String what = describe(producer, consumer);
        assertEquals(0, consumer.number("bad"), "tensors with the wrong bytes: " + what);
        assertEquals(0, consumer.number("duplicates"), "tensors handed over twice: " + what);
        assertEquals(count, consumer.number("received"), what);
        assertEquals(0, consumer.number("errors"), "errors out of receive: " + what);
    }

    private static Map<String, String> failureCounts(Worker producer) throws IOException {
        String text = producer.result().get("failures");
        Map<String, String> counts = new java.util.TreeMap<>();
        String inner = text.substring(1, text.length() - 1);
        if (!inner.isEmpty()) {
            for (String entry : inner.split(", ")) {
                int eq = entry.indexOf('=');
                counts.put(entry.substring(0, eq), entry.substring(eq + 1));
            }
        }
        return counts;
    }

    /** Nothing in the test's directory once every process has exited (after a sweep where the scenario allows one). */
    private void assertNothingLeft(boolean sweep) {
        if (sweep) {
            Reclaimer.sweep(shm.path());
        }
        List<String> left = ShmTestDir.list(shm.path());
        assertTrue(left.isEmpty(), (sweep ? "left after a sweep: " : "left with no sweep: ") + left);
    }

    private static String describe(Worker... all) {
        StringBuilder text = new StringBuilder();
        for (Worker worker : all) {
            List<String> lines = worker.outputQuietly().lines().toList();
            text.append("\n--- ").append(worker).append(" ---\n")
                .append(String.join("\n", lines.subList(Math.max(0, lines.size() - 25), lines.size())));
        }
        return text.toString();
    }
}
