package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorChannels;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The library's peers through its public API and built-in mailbox: {@code arena-send} (the producer fills
 * its own buffer, {@code send} copies it into a slot), {@code arena-claim} (the producer fills the claimed
 * slot, then publishes it) and {@code file} (the file transport).
 */
final class ArenaPeer {
    private static final String ENDPOINT = "mstar-xbench";
    private static final String END = "end";

    private ArenaPeer() {
    }

    private static Deployment deployment(String peer, String dir, String entity) {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir,
            TransportConfig.ARENA, peer.equals("file") ? "0" : "1",
            TransportConfig.MAX_SEGMENTS, "4")::get);
        return Deployment.of(config, ENDPOINT, entity);
    }

    static void consumer(String peer, String dir) {
        Deployment deployment = deployment(peer, dir, "consumer");
        Protocol.Verifier verifier = new Protocol.Verifier();
        boolean[] done = new boolean[1];
        boolean coalesce = Boolean.getBoolean("xbench.coalesceAcks");
        List<UUID> pending = new ArrayList<>();
        String[] producer = new String[1];
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorChannels.mailbox(deployment)) {
            System.out.println("READY");
            TensorChannel.Listener listener = new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    List<UUID> acks = new ArrayList<>(batch.size());
                    for (TensorDescriptor d : batch) {
                        if (d.requestId().equals(END)) {
                            done[0] = true;
                        } else {
                            try (ReceivedTensor t = transport.receive(d)) {
                                verifier.check(t.data());
                            }
                        }
                        acks.add(d.uuid());
                    }
                    if (coalesce) { // one ACK message per poll, for every payload it delivered
                        pending.addAll(acks);
                        producer[0] = from;
                    } else {
                        mailbox.sendAcks(from, acks);
                    }
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            };
            while (!done[0]) {
                mailbox.receive(listener, Duration.ofMillis(100));
                if (!pending.isEmpty()) {
                    mailbox.sendAcks(producer[0], pending);
                    pending.clear();
                }
            }
        }
        System.out.println(verifier.summary());
    }

    static void producer(String peer, String dir, double seconds) throws Exception {
        Deployment deployment = deployment(peer, dir, "producer");
        boolean claim = peer.equals("arena-claim");
        try (Arena scratch = Arena.ofShared();
             TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorChannels.mailbox(deployment)) {
            if (!mailbox.awaitPeer("consumer", Duration.ofSeconds(30))) {
                throw new IllegalStateException("the consumer did not start");
            }
            MemorySegment source = scratch.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
            Producer loop = new Producer() {
                @Override
                void send(long seq, long size) {
                    if (claim) {
                        TensorClaim room = transport.claim("x", DType.U8, size);
                        Protocol.fill(room.memory(), seq);
                        mailbox.sendDescriptors("consumer", List.of(room.publish()));
                    } else {
                        MemorySegment payload = source.asSlice(0, size);
                        Protocol.fill(payload, seq);
                        mailbox.sendDescriptors("consumer", transport.send("x", List.of(Tensor.of(DType.U8, payload, size))));
                    }
                }
            };
            Thread acker = Thread.ofPlatform().daemon().start(() -> {
                TensorChannel.Listener listener = new TensorChannel.Listener() {
                    @Override
                    public void descriptors(String from, List<TensorDescriptor> batch) {
                    }

                    @Override
                    public void acks(String from, List<UUID> uuids) {
                        transport.ack(from, uuids);
                        for (int i = 0; i < uuids.size(); i++) {
                            loop.acked();
                        }
                    }
                };
                while (!Thread.currentThread().isInterrupted()) {
                    try {
                        mailbox.receive(listener, Duration.ofMillis(100));
                    } catch (IllegalStateException closed) {
                        return;
                    }
                }
            });
            loop.run(seconds);
            mailbox.sendDescriptors("consumer", transport.send(END, List.of(Tensor.of(DType.U8, MemorySegment.NULL, 0))));
            Thread.sleep(200); // the end marker's ACK
            acker.interrupt();
        }
    }
}
