package io.mstar.transport.docs;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.staging.StagedBatch;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The user guide's code blocks are {@link UserGuideExamples}' regions, and those run. */
class UserGuideTest {
    private static final Path GUIDE = Path.of("docs/user-guide.md");
    private static final Path EXAMPLES = Path.of("src/test/java/io/mstar/transport/docs/UserGuideExamples.java");
    private static final Path QUICKSTART = Path.of("examples/quickstart/src/main/java/quickstart");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void everyJavaBlockOfTheGuideIsACompiledExampleAndEveryExampleIsInTheGuide() throws IOException {
        assertBlocksAreRegions(GUIDE, List.of(QUICKSTART.resolve("FastProducer.java"), QUICKSTART.resolve("FastConsumer.java")),
            EXAMPLES);
    }

    /** The README shows the quickstart's producer, consumer and pom as whole files, and its flags. */
    @Test
    void theReadmeShowsTheQuickstartAsItIs() throws IOException {
        Path readme = Path.of("README.md");
        assertBlocksAreRegions(readme, List.of(QUICKSTART.resolve("Producer.java"), QUICKSTART.resolve("Consumer.java")));
        String text = Files.readString(readme);
        String pom = Files.readString(Path.of("examples/quickstart/pom.xml"));
        String xml = text.substring(text.indexOf("```xml\n") + 7, text.indexOf("\n```", text.indexOf("```xml\n")) + 1);
        assertEquals(pom, xml, "the README's pom is the quickstart's, whole: a project made from it builds");
        String run = oneLine(Files.readString(Path.of("examples/quickstart/run.sh")));
        for (String flags : List.of("--enable-native-access=ALL-UNNAMED --add-exports java.base/jdk.internal.misc=ALL-UNNAMED",
            "--enable-native-access=io.mstar.transport,com.sun.jna --add-exports java.base/jdk.internal.misc=org.agrona",
            "-cp 'target/classes:target/lib/*'", "-p target/lib --add-modules io.mstar.transport -cp target/classes")) {
            assertTrue(oneLine(text).contains(flags), "the README's commands: " + flags);
            assertTrue(run.contains(flags), "run.sh runs what the README says: " + flags);
        }
    }

    @Test
    void theOnnxRuntimePageShowsCompiledExamples() throws IOException {
        assertBlocksAreRegions(Path.of("docs/onnxruntime.md"),
            Path.of("src/test/java/io/mstar/transport/docs/OnnxExamples.java"));
    }

    @Test
    void theMetricsPageShowsCompiledExamples() throws IOException {
        assertBlocksAreRegions(Path.of("docs/metrics.md"),
            Path.of("src/test/java/io/mstar/transport/docs/MetricsExamples.java"));
    }

    // Shell text with its continuations and line breaks as single spaces, double quotes as single ones.
    private static String oneLine(String shell) {
        return shell.replace("\\\n", " ").replaceAll("\\s+", " ").replace('"', '\'');
    }

    /** Every ```java block of {@code doc} is a tagged region of one of {@code sources}, and every region is in it. */
    static void assertBlocksAreRegions(Path doc, Path... sources) throws IOException {
        assertBlocksAreRegions(doc, List.of(), sources);
    }

    /** As above, where a block may also be one of {@code wholeFiles}, each of which must be shown. */
    static void assertBlocksAreRegions(Path doc, List<Path> wholeFiles, Path... sources) throws IOException {
        List<String> blocks = guideBlocks(Files.readString(doc));
        Map<String, String> regions = new LinkedHashMap<>();
        for (Path source : sources) {
            regions.putAll(exampleRegions(Files.readString(source)));
        }
        for (Path file : wholeFiles) {
            regions.put(file.toString(), normalize(Files.readString(file)));
        }
        for (String block : blocks) {
            assertTrue(regions.containsValue(block), "a code block of " + doc + " is not an example of "
                + List.of(sources) + " (copy the region into the page, or the block into a region):\n" + block);
        }
        regions.forEach((name, region) -> assertTrue(blocks.contains(region),
            "example region " + name + " is not in " + doc + ":\n" + region));
    }

    /** The ```java blocks of a Markdown text. */
    static List<String> guideBlocks(String markdown) {
        List<String> blocks = new ArrayList<>();
        Matcher m = Pattern.compile("```java\n(.*?)```", Pattern.DOTALL).matcher(markdown);
        while (m.find()) {
            blocks.add(normalize(m.group(1)));
        }
        return blocks;
    }

    /** The tagged regions of a source file, by name, with their common indentation removed. */
    static Map<String, String> exampleRegions(String source) {
        Map<String, String> regions = new LinkedHashMap<>();
        Matcher m = Pattern.compile("// tag::(\\w+)\\[]\n(.*?)\n\\s*// end::\\1\\[]", Pattern.DOTALL).matcher(source);
        while (m.find()) {
            regions.put(m.group(1), normalize(m.group(2)));
        }
        return regions;
    }

    private static String normalize(String code) {
        List<String> lines = code.stripTrailing().lines().map(String::stripTrailing).toList();
        int indent = lines.stream().filter(l -> !l.isBlank()).mapToInt(l -> l.length() - l.stripLeading().length())
            .min().orElse(0);
        return String.join("\n", lines.stream().map(l -> l.isBlank() ? "" : l.substring(indent)).toList());
    }

    @Test
    void theEndpointExamplesRunBetweenAProducerAndItsConsumers() throws Exception {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2")::get);
        Deployment producerSide = Deployment.of(config, "ipc:///run/conductor.sock", "vision-encoder-0");
        MemorySegment bytes = MemorySegment.ofArray(new byte[3 * 224 * 224 * 2]);
        Tensor small = Tensor.of(DType.U8, bytes.asSlice(0, 64), 64);
        AtomicLong done = new AtomicLong();
        Queue<String> retry = new ConcurrentLinkedQueue<>();
        List<MemorySegment> seen = new CopyOnWriteArrayList<>();
        try (TensorEndpoint speech = TensorEndpoint.open(producerSide.withEntity("speech-0"));
             TensorEndpoint decoder = TensorEndpoint.open(producerSide.withEntity("decoder-0"));
             TensorEndpoint logger = TensorEndpoint.open(producerSide.withEntity("logger"));
             TensorEndpoint producer = UserGuideExamples.outcomes(producerSide, small, done, retry)) {
            AtomicBoolean stop = new AtomicBoolean();
            Thread reader = Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    UserGuideExamples.endpointReceive(speech, seen::add);
                }
            });
            try {
                assertEquals(Delivery.Status.DELIVERED, UserGuideExamples.endpointSend(producer, bytes).status());
                while (done.get() < 1) {
                    Thread.sleep(1);
                }
                assertEquals(2, seen.size(), "the posted tensor and the sent one");
            } finally {
                stop.set(true);
                reader.join();
            }
            Delivery held = producer.send("speech-0", "request-20", small);
            assertEquals(1, UserGuideExamples.keep(speech).size());
            assertEquals(Delivery.Status.DELIVERED, held.await(Duration.ofSeconds(5)), "the kept tensor's close ACKed it");

            Delivery fanned = UserGuideExamples.fanOut(producer, small);
            for (TensorEndpoint consumer : List.of(decoder, speech, logger)) {
                assertEquals(Delivery.Status.PENDING, fanned.status(), "not every reader has ACKed");
                assertEquals(1, consumer.receive(tensor -> { }, Duration.ofSeconds(5)));
            }
            assertEquals(Delivery.Status.DELIVERED, fanned.await(Duration.ofSeconds(5)));
            assertEquals(List.of(), List.copyOf(retry));
            assertEquals(0, producer.transport().statsSummary().inFlight());
        }
    }

    @Test
    void theExamplesRunBetweenAProducerAndItsConsumers() throws Exception {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2")::get);
        Deployment producerSide = Deployment.of(config, "ipc:///run/conductor.sock", "vision-encoder-0");
        Deployment consumerSide = producerSide.withEntity("speech-0");
        MemorySegment bytes = MemorySegment.ofArray(new byte[3 * 224 * 224 * 2]);
        try (TensorTransport producer = TensorTransports.create(producerSide, false);
             TensorTransport consumer = TensorTransports.create(consumerSide, false);
             TensorChannel consumerBox = TensorTransports.mailbox(consumerSide)) {
            List<TensorDescriptor> descriptors = UserGuideExamples.send(producer, bytes);
            TensorChannel.Listener producerListener = UserGuideExamples.producerListener(producer, d -> { });
            try (TensorChannel producerBox = UserGuideExamples.mailbox(producerSide, producer, producerListener, descriptors)) {
                // The consumer reads each tensor in place, copies it out, and ACKs it to its producer.
                MemorySegment copy = MemorySegment.ofArray(new byte[4 << 20]); // as large as the largest tensor
                List<MemorySegment> seen = new ArrayList<>();
                TensorChannel.Listener consumerListener = UserGuideExamples.producerListener(consumer,
                    d -> UserGuideExamples.receive(consumer, consumerBox, d, seen::add, copy));
                assertEquals(1, consumerBox.receive(consumerListener, Duration.ofSeconds(5)));
                assertEquals(1, seen.size());
                assertEquals(1, producerBox.receive(producerListener, Duration.ofSeconds(5)));
                assertEquals(0, producer.statsSummary().inFlight(), "the consumer's ACK freed the tensor");

                UserGuideExamples.claim(producer, producerBox, room -> room.fill((byte) 9));
                assertEquals(1, consumerBox.receive(consumerListener, Duration.ofSeconds(5)));
                assertEquals(2, seen.size());
                assertEquals(1, producerBox.receive(producerListener, Duration.ofSeconds(5)));
                assertEquals(0, producer.statsSummary().inFlight(), "the claimed tensor arrived and was ACKed");

                MemorySegment record = MemorySegment.ofArray(new byte[1024]);
                UserGuideExamples.hotLoop(producer, Tensor.of(DType.U8, bytes, bytes.byteSize()), record);
                long[] read = {0};
                assertEquals(1, UserGuideExamples.recordPath(producer, producerBox, consumer, consumerBox,
                    Tensor.of(DType.U8, bytes, bytes.byteSize()), record, (memory, offset, nbytes) -> read[0] += nbytes));
                assertEquals(bytes.byteSize(), read[0], "the consumer read the tensor in place");
                assertEquals(0, producer.statsSummary().inFlight(), "the record path's ACK freed it");
                TensorDescriptor d = producer.send("request-18", List.of(Tensor.of(DType.U8, bytes.asSlice(0, 16), 16))).getFirst();
                assertEquals(d, UserGuideExamples.ownChannel(consumerSide, d));
                UserGuideExamples.ownChannelLiveness(producer, "speech-0", List.of(d));
                UserGuideExamples.peerGone(producer, producerBox, List.of(d));
                assertEquals(1, consumerBox.poll(UserGuideExamples.producerListener(consumer, x -> { }), 10));
                producer.ack(List.of(d.uuid()));

                StagedBatch staged = UserGuideExamples.stage(producer, List.of(
                    new UserGuideExamples.Request("a", Tensor.of(DType.U8, bytes.asSlice(0, 8), 8)),
                    new UserGuideExamples.Request("b", Tensor.of(DType.U8, bytes.asSlice(0, 8), 8))));
                assertEquals(2, staged.descriptors().size());
                staged.descriptors().forEach(r -> producer.ack(r.stream().map(TensorDescriptor::uuid).toList()));
                assertEquals(0, producer.statsSummary().inFlight());
                assertEquals(0, producer.statsSummary().unknownAcks());
            }
            PeerUnavailableException gone = null;
            try (TensorChannel late = TensorTransports.mailbox(producerSide)) {
                late.sendDescriptors("not-running", descriptors);
            } catch (PeerUnavailableException e) {
                gone = e;
            }
            assertEquals("not-running", gone == null ? null : gone.entity());
            producer.ack(descriptors.stream().map(TensorDescriptor::uuid).toList()); // freed already: counted, ignored
        }
    }
}
