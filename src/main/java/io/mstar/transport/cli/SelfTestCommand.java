package io.mstar.transport.cli;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.cuda.CudaProbe;
import io.mstar.transport.cuda.CudaStatus;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.lifecycle.ShmDirectory;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32C;

/**
 * {@code mstar-shm selftest}: does the library work in this JVM, as launched? A producer and a consumer
 * transport with their mailboxes, in this process, move one checksummed tensor through the arena and
 * its ACK back; then CUDA is probed. Exit 0 when the tensor arrived intact and was freed.
 */
final class SelfTestCommand {
    private static final int BYTES = 1 << 20;

    private SelfTestCommand() {
    }

    static int run(String[] args, PrintStream out) throws InterruptedException {
        Map<String, String> env = new HashMap<>(System.getenv());
        boolean json = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--json")) {
                json = true;
            } else if (args[i].equals("--dir") && i + 1 < args.length) {
                env.put(TransportConfig.SHM_DIR, args[++i]);
            } else {
                throw new MstarShm.UsageException("unknown option for selftest: " + args[i]);
            }
        }
        env.put(TransportConfig.ARENA, "1");
        env.putIfAbsent(TransportConfig.SEGMENT_MB, "8");
        TransportConfig config = TransportConfig.from(env::get);
        ShmDirectory.prepare(config.shmDir());
        if (!Files.isDirectory(config.shmDir())) {
            throw new MstarShm.UsageException("not a directory: " + config.shmDir());
        }
        String endpoint = "mstar-selftest-" + Owner.newNonce();
        byte[] bytes = new byte[BYTES];
        new SplittableRandom(7).nextBytes(bytes);
        Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(bytes), BYTES);
        Deployment producerSide = Deployment.of(config, endpoint, "producer");
        Deployment consumerSide = producerSide.withEntity("consumer");
        try (TensorTransport producer = TensorTransports.create(producerSide, false);
             TensorChannel producerBox = TensorTransports.mailbox(producerSide, producer);
             TensorTransport consumer = TensorTransports.create(consumerSide, false);
             TensorChannel consumerBox = TensorTransports.mailbox(consumerSide)) {
            producerBox.sendDescriptors("consumer", producer.send("selftest", List.of(tensor)));
            AtomicReference<String> verdict = new AtomicReference<>("no descriptor arrived");
            consumerBox.receive(new Receiver() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    try (ReceivedTensor in = consumer.receive(batch.getFirst())) {
                        verdict.set(crc(in.data()) == crc(tensor.data()) ? "intact" : "CORRUPTED");
                    }
                    consumerBox.sendAcks(from, List.of(batch.getFirst().uuid()));
                }
            }, Duration.ofSeconds(10));
            producerBox.receive(new Receiver() {
                @Override
                public void acks(String from, List<UUID> uuids) {
                    producer.ack(from, uuids);
                }
            }, Duration.ofSeconds(10));
            long inFlight = producer.statsSummary().inFlight();
            String arena = "1 MiB tensor " + verdict.get() + " through the mailbox, ACKed, inFlight=" + inFlight
                + ", dir=" + config.shmDir() + ", module=" + SelfTestCommand.class.getModule();
            CudaStatus cuda = CudaProbe.probe(config);
            String cudaLine = cuda.usable() ? "usable, " + cuda.devices() + " devices, library " + cuda.library()
                : cuda.reason();
            boolean ok = verdict.get().equals("intact") && inFlight == 0;
            if (json) {
                out.println("{\"passed\":" + ok + ",\"arena\":" + Json.quote(arena) + ",\"cudaUsable\":" + cuda.usable()
                    + ",\"cuda\":" + Json.quote(cudaLine) + ",\"version\":" + Json.quote(MstarShm.version()) + "}");
            } else {
                out.println("arena: " + arena);
                out.println("cuda: " + cudaLine);
                out.println(ok ? "selftest passed" : "selftest FAILED");
            }
            return ok ? 0 : 1;
        }
    }

    private static long crc(MemorySegment data) {
        CRC32C crc = new CRC32C();
        crc.update(data.asByteBuffer());
        return crc.getValue();
    }

    /** A listener that ignores what a test step does not expect. */
    private abstract static class Receiver implements TensorChannel.Listener {
        @Override
        public void descriptors(String from, List<TensorDescriptor> batch) {
        }

        @Override
        public void acks(String from, List<UUID> uuids) {
        }
    }

}
