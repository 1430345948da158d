package io.mstar.transport.docs;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.PeerUnavailableException;
import io.mstar.transport.StagedBatch;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorChannels;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
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
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The user guide's code blocks are {@link UserGuideExamples}' regions, and those run. */
class UserGuideTest {
    private static final Path GUIDE = Path.of("docs/user-guide.md");
    private static final Path EXAMPLES = Path.of("src/test/java/io/mstar/transport/docs/UserGuideExamples.java");

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void everyJavaBlockOfTheGuideIsACompiledExampleAndEveryExampleIsInTheGuide() throws IOException {
        assertBlocksAreRegions(GUIDE, EXAMPLES);
    }

    @Test
    void theReadmeShowsTheCompiledProducerAndConsumer() throws IOException {
        assertBlocksAreRegions(Path.of("README.md"), Path.of("src/test/java/io/mstar/transport/docs/ReadmeProducer.java"),
            Path.of("src/test/java/io/mstar/transport/docs/ReadmeConsumer.java"));
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

    /** Every ```java block of {@code doc} is a tagged region of one of {@code sources}, and every region is in it. */
    static void assertBlocksAreRegions(Path doc, Path... sources) throws IOException {
        List<String> blocks = guideBlocks(Files.readString(doc));
        Map<String, String> regions = new LinkedHashMap<>();
        for (Path source : sources) {
            regions.putAll(exampleRegions(Files.readString(source)));
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
    void theExamplesRunBetweenAProducerAndItsConsumers() throws Exception {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString(),
            TransportConfig.ARENA, "1", TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2")::get);
        Deployment producerSide = Deployment.of(config, "ipc:///run/conductor.sock", "vision-encoder-0");
        Deployment consumerSide = producerSide.withEntity("speech-0");
        MemorySegment bytes = MemorySegment.ofArray(new byte[3 * 224 * 224 * 2]);
        try (TensorTransport producer = TensorTransports.create(producerSide, false);
             TensorTransport consumer = TensorTransports.create(consumerSide, false);
             TensorChannel consumerBox = TensorChannels.mailbox(consumerSide);
             TensorChannel decoderBox = TensorChannels.mailbox(producerSide.withEntity("decoder-0"));
             TensorChannel loggerBox = TensorChannels.mailbox(producerSide.withEntity("logger"))) {
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

                List<TensorDescriptor> fanned = UserGuideExamples.fanOut(producer, producerBox,
                    Tensor.of(DType.U8, bytes.asSlice(0, 64), 64));
                List<UUID> uuids = fanned.stream().map(TensorDescriptor::uuid).toList();
                for (String reader : List.of("decoder-0", "speech-0")) {
                    producer.ack(reader, uuids);
                    assertEquals(1, producer.statsSummary().inFlight(), "not every reader has ACKed");
                }
                producer.ack("logger", uuids);

                StagedBatch staged = UserGuideExamples.stage(producer, List.of(
                    new UserGuideExamples.Request("a", Tensor.of(DType.U8, bytes.asSlice(0, 8), 8)),
                    new UserGuideExamples.Request("b", Tensor.of(DType.U8, bytes.asSlice(0, 8), 8))));
                assertEquals(2, staged.descriptors().size());
                staged.descriptors().forEach(r -> producer.ack(r.stream().map(TensorDescriptor::uuid).toList()));
                assertEquals(0, producer.statsSummary().inFlight());
                assertEquals(0, producer.statsSummary().unknownAcks());
            }
            PeerUnavailableException gone = null;
            try (TensorChannel late = TensorChannels.mailbox(producerSide)) {
                late.sendDescriptors("not-running", descriptors);
            } catch (PeerUnavailableException e) {
                gone = e;
            }
            assertEquals("not-running", gone == null ? null : gone.entity());
            producer.ack(descriptors.stream().map(TensorDescriptor::uuid).toList()); // freed already: counted, ignored
        }
    }
}
