package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorRecords;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.codec.DescriptorCodec;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The library's peers through its public API and built-in mailbox, on the record path (descriptor records
 * sent as they are, read in place, ACKed by uuid halves: the steady state allocates nothing):
 * {@code arena-send} (the producer fills its own buffer, {@code sendInto} copies it into a slot),
 * {@code arena-claim} (the producer fills the claimed slot, then publishes it) and {@code file} (the file
 * transport); {@code remote} is {@code arena-claim} across two "nodes": each JVM has a shared-memory directory
 * of its own and the tensors cross on the cross-node path (Aeron UDP on 127.0.0.1, MTU
 * {@code -Dxbench.remoteMtu}, default 8192). A zero-byte tensor ends the run.
 */
final class ArenaPeer {
    private static final String ENDPOINT = "mstar-xbench";

    private ArenaPeer() {
    }

    private static Deployment deployment(String peer, String dir, String entity) throws IOException {
        Map<String, String> env = new HashMap<>(Map.of(TransportConfig.SHM_DIR, dir,
            TransportConfig.ARENA, peer.equals("file") ? "0" : "1",
            TransportConfig.MAX_SEGMENTS, "4"));
        if (peer.equals("remote")) {
            Path ports = Path.of(dir, "ports"); // chosen by the consumer, which starts first
            if (!Files.exists(ports)) {
                try (DatagramSocket a = new DatagramSocket(0, InetAddress.getLoopbackAddress());
                     DatagramSocket b = new DatagramSocket(0, InetAddress.getLoopbackAddress())) {
                    Files.writeString(ports, a.getLocalPort() + " " + b.getLocalPort());
                }
            }
            String[] port = Files.readString(ports).split(" ");
            String consumer = "127.0.0.1:" + port[0];
            String producer = "127.0.0.1:" + port[1];
            env.put(TransportConfig.SHM_DIR, Files.createDirectories(Path.of(dir, entity)).toString());
            env.put(RemoteConfig.LISTEN, entity.equals("consumer") ? consumer : producer);
            env.put(RemoteConfig.ENTITIES, "consumer=" + consumer + ",producer=" + producer);
            env.put(RemoteConfig.MTU, System.getProperty("xbench.remoteMtu", "8192"));
        }
        return Deployment.of(TransportConfig.from(env::get), ENDPOINT, entity);
    }

    // The same backoff as the Aeron peer's loops: spin, yield, then park up to 100 us.
    private static IdleStrategy idleStrategy() {
        return new BackoffIdleStrategy(16, 8, 1_000, 100_000);
    }

    static void consumer(String peer, String dir) throws IOException {
        Deployment deployment = deployment(peer, dir, "consumer");
        Protocol.Verifier verifier = new Protocol.Verifier();
        boolean[] done = new boolean[1];
        boolean coalesce = Boolean.getBoolean("xbench.coalesceAcks");
        long[] acks = new long[2 * 64]; // one poll's ACKs: at most 64 messages of one descriptor
        int[] pending = new int[1];
        String[] producer = new String[1];
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment)) {
            System.out.println("READY");
            TensorRecords.Reader check = verifier::check;
            TensorChannel.RecordListener listener = new TensorChannel.RecordListener() {
                @Override
                public void descriptor(String from, MemorySegment record, long offset, int length) {
                    if (DescriptorCodec.nbytes(record, offset) == 0) {
                        done[0] = true;
                    } else {
                        transport.records().receive(record, offset, length, check);
                    }
                    long msb = DescriptorCodec.uuidMsb(record, offset);
                    long lsb = DescriptorCodec.uuidLsb(record, offset);
                    if (coalesce && pending[0] < 64) { // sent after the poll, all in one message
                        acks[2 * pending[0]] = msb;
                        acks[2 * pending[0] + 1] = lsb;
                        pending[0]++;
                        producer[0] = from;
                    } else {
                        mailbox.records().sendAck(from, msb, lsb);
                    }
                }

                @Override
                public void ack(String from, long msb, long lsb) {
                }
            };
            IdleStrategy idle = idleStrategy();
            while (!done[0]) {
                idle.idle(mailbox.records().pollRecords(listener, 64));
                if (pending[0] > 0) {
                    mailbox.records().sendAcks(producer[0], acks, pending[0]);
                    pending[0] = 0;
                }
            }
        }
        System.out.println(verifier.summary());
    }

    static void producer(String peer, String dir, double seconds) throws Exception {
        Deployment deployment = deployment(peer, dir, "producer");
        boolean claim = peer.equals("arena-claim") || peer.equals("remote");
        try (Arena scratch = Arena.ofShared();
             TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment)) {
            if (!mailbox.awaitPeer("consumer", Duration.ofSeconds(30))) {
                throw new IllegalStateException("the consumer did not start");
            }
            MemorySegment source = scratch.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
            MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
            Tensor[] payloads = new Tensor[Protocol.SIZES.length];
            for (int i = 0; i < payloads.length; i++) {
                payloads[i] = Tensor.of(DType.U8, source.asSlice(0, Protocol.SIZES[i]), Protocol.SIZES[i]);
            }
            Producer loop = new Producer() {
                @Override
                void send(long seq, long size) {
                    int length;
                    if (claim) {
                        try (TensorClaim room = transport.claim("x", DType.U8, size)) {
                            Protocol.fill(room.memory(), seq);
                            length = room.publish(record, 0);
                        }
                    } else {
                        Tensor payload = payloads[Arrays.binarySearch(Protocol.SIZES, size)];
                        Protocol.fill(payload.data(), seq);
                        length = transport.records().sendInto("x", payload, record, 0);
                    }
                    mailbox.records().sendDescriptorRecord("consumer", record, 0, length);
                }
            };
            Thread acker = Thread.ofPlatform().daemon().start(() -> {
                TensorChannel.RecordListener listener = new TensorChannel.RecordListener() {
                    @Override
                    public void descriptor(String from, MemorySegment in, long offset, int length) {
                    }

                    @Override
                    public void ack(String from, long msb, long lsb) {
                        transport.records().ack(msb, lsb);
                        loop.acked();
                    }
                };
                IdleStrategy idle = idleStrategy();
                while (!Thread.currentThread().isInterrupted()) {
                    try {
                        idle.idle(mailbox.records().pollRecords(listener, 64));
                    } catch (IllegalStateException closed) {
                        return;
                    }
                }
            });
            loop.run(seconds);
            int length = transport.records().sendInto("end", Tensor.of(DType.U8, MemorySegment.NULL, 0), record, 0);
            mailbox.records().sendDescriptorRecord("consumer", record, 0, length);
            Thread.sleep(200); // the end marker's ACK
            acker.interrupt();
        }
    }
}
