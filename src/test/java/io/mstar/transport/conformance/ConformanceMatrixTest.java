package io.mstar.transport.conformance;

import io.mstar.transport.TransportConfig;
import io.mstar.transport.conformance.Pairing.Language;
import io.mstar.transport.lifecycle.Reclaimer;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.PythonChild;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.LinkOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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

    /**
     * Listeners that call back into the endpoint or fail: one that posts a follow-up tensor for each outcome (a
     * request loop, 300 tensors, 8 in flight), one that raises on every 7th outcome, one that closes the endpoint at
     * its 100th. Every post that returned is told exactly once (none that raised), nothing hangs; the request loop
     * and the raising listener get all 300 DELIVERED and intact; after the close only CLOSED is told. Each listener
     * is checked, and reported, on its own.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void listenersThatPostRaiseOrCloseTellEveryPostOnce(Pairing pairing) {
        requireEnvironment(pairing);
        assertAll(List.of("post", "raise:7", "close:100").stream().map(listener -> () -> {
            try {
                Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "4");
                Worker producer = producer(pairing.producer, CONSUMER, 300, 13, 8, 4096, "--listener", listener);
                assertExited(producer, consumer);
                String what = "listener " + listener + ": " + describe(producer, consumer);
                long posted = producer.number("posted");
                assertEquals(0, producer.number("duplicates"), "outcomes told twice: " + what);
                assertEquals(0, producer.number("unknown"), "outcomes for posts that raised: " + what);
                assertEquals(posted, producer.number("told"), "posts that returned and were never told: " + what);
                if (listener.startsWith("close")) {
                    assertTrue(Set.of("CLOSED").containsAll(failureCounts(producer).keySet()), what);
                    assertTrue(producer.number("delivered") >= 99, what);
                    assertEquals(0, consumer.number("bad"), what);
                    assertEquals(0, consumer.number("duplicates"), what);
                } else {
                    assertEquals(300, posted, what);
                    assertEquals(300, producer.number("delivered"), what);
                    assertReceivedIntact(consumer, 300, producer);
                }
            } finally {
                stopWorkers();
            }
            assertNothingLeft(false);
        }));
    }

    /**
     * A consumer that keeps the received tensor and its array or segment without {@code keep()} and reads them after
     * the handler returned (after its next receive, when the producer may have reused the slot): the tensor's
     * accessor refuses (the JVM: IllegalStateException; Python: a refused access), and the kept view refuses (the
     * JVM: a closed segment) or, where the language documents that a view holds its slot (Python), still shows its
     * own tensor: never another tensor's bytes. Every post is DELIVERED once.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aViewUsedAfterItsHandlerNeverShowsAnotherTensor(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "stale-view", "--idle", "5");
        Worker producer = producer(pairing.producer, CONSUMER, 300, 14, 8, 4096);
        assertExited(producer, consumer);
        String what = describe(producer, consumer);
        assertEquals(0, consumer.number("staleViews"), "a view showed another tensor's bytes: " + what);
        assertEquals(0, consumer.number("openAccessors"), "a tensor's accessor answered after its handler: " + what);
        assertEquals(300, consumer.number("refusedViews") + consumer.number("ownViews"), what);
        if (pairing.consumer == Language.JVM) {
            assertEquals(300, consumer.number("refusedViews"), "the JVM refuses a view outside its handler: " + what);
        }
        assertToldOnce(producer, 300);
        assertEquals(300, producer.number("delivered"), what);
        assertReceivedIntact(consumer, 300, producer);
        assertNothingLeft(false);
    }

    /**
     * A producer that closes with tensors in flight (its consumer stopped reading after 50), then polls and awaits
     * outcomes: each call returns what close did not tell (Python without a listener: the CLOSED ones; the JVM's
     * polled listener: nothing more) and never throws or crashes; every post is told exactly once, the 50 read
     * DELIVERED and the rest CLOSED.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void pollingAfterCloseTellsOnlyWhatCloseLeft(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 1_000_000, "stop-after:50");
        Worker producer = producer(pairing.producer, CONSUMER, 200, 15, 16, 4096, "--wait", "3", "--close-then-poll",
            "--no-listener");
        int rc = producer.await(EXIT_S);
        String what = describe(producer, consumer);
        assertTrue(rc == 0 || rc == 1, "the producer crashed (exit " + rc + "): " + what);
        assertEquals(0, producer.number("pollErrors"), "a poll after close threw: " + what);
        long posted = producer.number("posted");
        assertToldOnce(producer, posted);
        assertEquals(50, producer.number("delivered"), what);
        assertEquals("{CLOSED=" + (posted - 50) + "}", producer.result().get("failures"), what);
        consumer.terminate();
        assertNothingLeft(true);
    }

    /**
     * Hostile ring input in a consumer's mailbox, written while its producer pauses after 100 of 300 tensors: a
     * zero-filled record (space claimed, not a byte written: skipped after at most 3 s) and a stuck claim (a record
     * claimed and never published by a registered writer that died: skipped after 1 s), docs/format.md section 7.
     * The consumer skips it, counts it, and serves on: the 200 tensors posted behind it are DELIVERED intact, every
     * post told once. Each kind is checked, and reported, on its own.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void hostileRingInputIsSkippedAndTheConsumerServesOn(Pairing pairing) {
        requireEnvironment(pairing);
        assertAll(List.of("zero-filled", "stuck-claim").stream().map(kind -> () -> {
            try {
                Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "10");
                Worker producer = producer(pairing.producer, CONSUMER, 300, 16, 8, 4096, "--pause-at", "100",
                    "--pause-ms", "1000", "--wait", "15");
                producer.awaitOutput("PAUSED", 60);
                try (RingForger ring = new RingForger(shm.path().resolve(ShmNames.mailbox(namespace(), CONSUMER)))) {
                    if (kind.equals("zero-filled")) {
                        ring.zeroFilled(64);
                    } else {
                        ring.stuckClaim(RingForger.ACKS, RingForger.message(PRODUCER, 1, new byte[16]), true);
                    }
                }
                assertExited(producer, consumer);
                String what = kind + ": " + describe(producer, consumer);
                assertToldOnce(producer, 300);
                assertEquals(300, producer.number("delivered"), what);
                assertReceivedIntact(consumer, 300, producer);
                assertTrue(consumer.number("skipped") >= 1, "the skip was not counted: " + what);
            } finally {
                stopWorkers();
            }
            assertNothingLeft(false);
        }));
    }

    /**
     * Forged descriptors in a consumer's mailbox, each in a record published as a producer publishes one, while the
     * producer pauses after 100 of 300 tensors: zero bytes with dimensions whose product overflows, an offset past
     * the producer's segment, a segment name of another deployment, a file name with path characters (the segment's
     * absolute path), a negative rank. None is handed to the handler; each is counted as bad input; the endpoint
     * serves on and the 200 later tensors are DELIVERED intact.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void forgedDescriptorsAreCountedBadAndTheConsumerServesOn(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "10");
        Worker producer = producer(pairing.producer, CONSUMER, 300, 17, 8, 4096, "--pause-at", "100", "--pause-ms",
            "1000");
        producer.awaitOutput("PAUSED", 60);
        String segment = producerSegment();
        String ns = namespace().toString();
        String otherNs = ns.startsWith("0") ? "1" + ns.substring(1) : "0" + ns.substring(1);
        List<byte[]> forged = List.of(
            forged(1, 6, 3, 0, 0, new long[] {1L << 33, 1L << 33, 0}, "forged-huge-dims", segment),
            forged(2, 6, 1, 4096, 1L << 30, new long[] {4096}, "forged-offset-past", segment),
            forged(3, 6, 1, 4096, 0, new long[] {4096}, "forged-other-deployment", segment.replace(ns, otherNs)),
            forged(4, 6, 1, 4096, 0, new long[] {4096}, "forged-path", shm.path().resolve(segment).toString()),
            forged(5, 6, 0xFF, 4096, 0, new long[] {4096}, "forged-negative-rank", segment));
        try (RingForger ring = new RingForger(shm.path().resolve(ShmNames.mailbox(namespace(), CONSUMER)))) {
            for (byte[] record : forged) {
                ring.published(RingForger.DESCRIPTORS, RingForger.message(PRODUCER, 1, record));
            }
        }
        assertExited(producer, consumer);
        String what = describe(producer, consumer);
        assertEquals(0, consumer.number("forged"), "a forged descriptor was handed over: " + what);
        assertTrue(consumer.number("badInput") >= forged.size(), "forged descriptors not counted bad: " + what);
        assertToldOnce(producer, 300);
        assertEquals(300, producer.number("delivered"), what);
        assertReceivedIntact(consumer, 300, producer);
        assertNothingLeft(false);
    }

    /**
     * A file of another user (uid 65534) of a mailbox's size at a consumer's own mailbox name: opening its endpoint
     * fails with a typed error (OPEN-FAILED), never removes, maps or writes the file. One endpoint alone: run once
     * per language.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Language.class)
    void aFileOfAnotherUserAtItsOwnMailboxIsNeverUsed(Language language) throws Exception {
        requireEnvironment(language == Language.PYTHON ? Pairing.PYTHON_TO_PYTHON : Pairing.JVM_TO_JVM);
        Path file = plantOtherUsers(ShmNames.mailbox(namespace(), CONSUMER), new byte[(int) RingForger.FILE]);
        Worker consumer = Worker.start(language, env(), "consume", DEPLOYMENT, CONSUMER, "10", "plain", "--idle", "1");
        workers.add(consumer);
        int rc = consumer.await(30);
        String what = describe(consumer);
        assertTrue(consumer.output().contains("OPEN-FAILED"), "opened over another user's file: " + what);
        assertEquals(ConformanceWorker.OPEN_FAILED_EXIT, rc, what);
        assertOtherUsersUntouched(file, new byte[(int) RingForger.FILE], what);
    }

    /**
     * A file of another user (uid 65534) at a name of the producer's segments, holding a checked tensor whose stamp
     * matches, named by a descriptor published into the consumer's mailbox: the consumer never maps it or hands it
     * over (it counts the descriptor bad and refuses it), never removes it, and serves on: the 200 later tensors are
     * DELIVERED intact.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(Pairing.class)
    void aSegmentOfAnotherUserIsNeverMapped(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        long msb = 0x0123456789abcdefL;
        long lsb = 0x1122334455667788L;
        ByteBuffer bytes = ByteBuffer.allocate(1 << 16).order(ByteOrder.nativeOrder());
        long base = 77 * ConformanceWorker.GOLDEN;
        for (int k = 0; k < 512; k++) {
            bytes.putLong(base + k);
        }
        bytes.putLong(msb).putLong(lsb);
        String name = ShmNames.segment(namespace(), PRODUCER, "0badf00d", 0);
        Path file = plantOtherUsers(name, bytes.array());
        Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "10");
        Worker producer = producer(pairing.producer, CONSUMER, 300, 18, 8, 4096, "--pause-at", "100", "--pause-ms",
            "1000");
        producer.awaitOutput("PAUSED", 60);
        try (RingForger ring = new RingForger(shm.path().resolve(ShmNames.mailbox(namespace(), CONSUMER)))) {
            ring.published(RingForger.DESCRIPTORS, RingForger.message(PRODUCER, 1, RingForger.descriptor(6, 1, 1, msb,
                lsb, 4096, 0, new long[] {4096}, "forged-other-user", PRODUCER, name)));
        }
        assertExited(producer, consumer);
        String what = describe(producer, consumer);
        assertEquals(0, consumer.number("forged"), "another user's segment was mapped and handed over: " + what);
        assertTrue(consumer.number("badInput") >= 1, "the descriptor was not counted bad: " + what);
        assertToldOnce(producer, 300);
        assertEquals(300, producer.number("delivered"), what);
        assertReceivedIntact(consumer, 300, producer);
        assertOtherUsersUntouched(file, bytes.array(), what);
    }

    /**
     * {@code fork()} with a consumer's endpoint open (Python only: the JVM cannot fork, so the scenario runs where
     * the consumer is Python, with either producer). A child that exits at once, through the interpreter's exit,
     * removes nothing of the parent's: the parent serves on and gets all 300 tensors, and leaves nothing once it
     * exited. A parent SIGKILLed with 16 tensors in flight while its forked child lives is still found dead by its
     * producer: they are told CONSUMER_DIED, not left to the producer's close.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(value = Pairing.class, names = {"JVM_TO_PYTHON", "PYTHON_TO_PYTHON"})
    void aForkedConsumersChildLeavesTheParentAlone(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "15", "--fork", "child-exits");
        long child = childPid(consumer);
        awaitGone(child);
        Worker producer = producer(pairing.producer, CONSUMER, 300, 19, 8, 4096);
        assertExited(producer, consumer);
        assertToldOnce(producer, 300);
        assertEquals(300, producer.number("delivered"), "after the child's exit: " + describe(producer, consumer));
        assertReceivedIntact(consumer, 300, producer);
        assertNothingLeft(false);
        stopWorkers();

        Worker parent = consumer(pairing.consumer, CONSUMER, 1_000_000, "stop-after:20", "--fork", "child-lives");
        long living = childPid(parent);
        Worker second = producer(pairing.producer, CONSUMER, 36, 20, 16, 4096, "--wait", "15"); // 20 read, 16 not
        parent.awaitOutput("PROGRESS", 60);
        Thread.sleep(1000); // the window fills (a post after the kill is REFUSED: it never reached the parent)
        parent.kill();
        assertTrue(isRunning(living), "the forked child died too");
        second.await(EXIT_S);
        String what = describe(second, parent);
        assertToldOnce(second, second.number("posted"));
        assertEquals(20, second.number("delivered"), what);
        assertTrue(second.result().get("failures").matches("\\{CONSUMER_DIED=\\d+(, REFUSED=\\d+)?}"),
            "the SIGKILLed parent was not found dead while its child lived: " + what);
        killChild(living);
        assertNothingLeft(true);
    }

    /**
     * {@code fork()} with a producer's endpoint open (Python only: the JVM cannot fork, so the scenario runs where
     * the producer is Python, with either consumer). A child that exits at once, through the interpreter's exit,
     * removes nothing of the parent's: every post is DELIVERED once and nothing is left once the parent exited. A
     * parent SIGKILLed mid-stream while its forked child lives is found dead: a sweep removes all its files while
     * the child still runs.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(value = Pairing.class, names = {"PYTHON_TO_JVM", "PYTHON_TO_PYTHON"})
    void aForkedProducersChildLeavesTheParentAlone(Pairing pairing) throws Exception {
        requireEnvironment(pairing);
        Worker consumer = consumer(pairing.consumer, CONSUMER, 300, "plain", "--idle", "5");
        Worker producer = producer(pairing.producer, CONSUMER, 300, 21, 8, 4096, "--fork", "child-exits",
            "--pause-ms", "1000");
        awaitGone(childPid(producer));
        assertExited(producer, consumer);
        assertToldOnce(producer, 300);
        assertEquals(300, producer.number("delivered"), "after the child's exit: " + describe(producer, consumer));
        assertReceivedIntact(consumer, 300, producer);
        assertNothingLeft(false);
        stopWorkers();

        Worker reader = consumer(pairing.consumer, CONSUMER, 1_000_000, "plain", "--idle", "5");
        Worker parent = producer(pairing.producer, CONSUMER, 1_000_000, 22, 8, 4096, "--fork", "child-lives");
        long living = childPid(parent);
        reader.awaitOutput("PROGRESS", 60);
        parent.kill();
        assertTrue(isRunning(living), "the forked child died too");
        Reclaimer.sweep(shm.path());
        List<String> left = ShmTestDir.list(shm.path()).stream().filter(n -> n.contains("_" + PRODUCER)).toList();
        assertTrue(left.isEmpty(), "the SIGKILLed parent's files outlived a sweep while its child lived: " + left);
        killChild(living);
        assertExited(reader);
        assertEquals(0, reader.number("bad"), describe(reader));
        assertNothingLeft(true);
    }

    // ---- hostile bytes and files ----

    private static byte[] forged(long uuid, int dtype, int rank, long nbytes, long offset, long[] shape, String id,
                                 String fileName) {
        return RingForger.descriptor(dtype, 1, rank, 0xF0F0F0F0L, uuid, nbytes, offset, shape, id, PRODUCER, fileName);
    }

    /** The name of a segment of the running producer. */
    private String producerSegment() throws IOException {
        try (var entries = Files.list(shm.path())) {
            return entries.map(p -> p.getFileName().toString())
                .filter(n -> n.contains("_arena_" + PRODUCER + "_") && !n.contains("0badf00d")).findFirst()
                .orElseThrow(() -> new AssertionError("no segment of the producer in " + ShmTestDir.list(shm.path())));
        }
    }

    /** A file of uid 65534, mode 0600, holding {@code content}, at {@code name}; removed after the scenario. */
    private Path plantOtherUsers(String name, byte[] content) throws IOException {
        Assumptions.assumeTrue("root".equals(System.getProperty("user.name")), "chown needs root");
        Path at = shm.path().resolve(name);
        Files.write(at, content, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        planted.add(at);
        Files.setPosixFilePermissions(at, PosixFilePermissions.fromString("rw-------"));
        Files.setAttribute(at, "unix:uid", 65534, LinkOption.NOFOLLOW_LINKS);
        return at;
    }

    private static void assertOtherUsersUntouched(Path file, byte[] content, String what) throws IOException {
        assertTrue(Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS), "another user's file was removed: " + what);
        assertEquals(65534, Files.getAttribute(file, "unix:uid", LinkOption.NOFOLLOW_LINKS), what);
        assertTrue(Arrays.equals(content, Files.readAllBytes(file)), "another user's file was written: " + what);
    }

    // ---- forked children ----

    private final List<Long> children = new ArrayList<>();

    private long childPid(Worker worker) throws Exception {
        worker.awaitOutput("CHILD pid=", 30);
        Matcher m = Pattern.compile("CHILD pid=(\\d+)").matcher(worker.output());
        assertTrue(m.find(), worker.output());
        long pid = Long.parseLong(m.group(1));
        children.add(pid);
        return pid;
    }

    /** Waits until the process exited: gone, or a zombie (a forked child's parent does not reap it). */
    private static void awaitGone(long pid) throws InterruptedException {
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (isRunning(pid) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
    }

    private static boolean isRunning(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
            return stat.charAt(stat.lastIndexOf(')') + 2) != 'Z';
        } catch (IOException e) {
            return false;
        }
    }

    private static void killChild(long pid) throws InterruptedException {
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
        awaitGone(pid);
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
        for (long pid : children) {
            killChild(pid);
        }
        children.clear();
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
