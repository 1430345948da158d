package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.exceptions.PeerUnavailableException;
import io.mstar.transport.lifecycle.ParentWatch;
import io.mstar.transport.remote.RoutedMailbox;

import java.io.BufferedWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.zip.CRC32C;

/**
 * One process of {@link RemoteNodesTest}, configured by its environment ({@code MSTAR_REMOTE_*}, its node's
 * directory). {@code producer N seed acksFile}: entity "prefill", sends N checksummed tensors to "decode"
 * (sizes from 4 KiB to 32 MiB), sends again what failed or was not confirmed in time, and writes
 * {@code seq wallMs} per confirmed tensor. {@code consumer receivedFile stopFile}: entity "decode",
 * verifies each tensor, appends {@code seq} (or {@code BAD seq}) to the file, ACKs, and stops when the stop
 * file appears and nothing arrived for a second.
 */
public final class RemoteNode {
    static final int HEADER = 16; // seq, then the CRC32C of the rest

    private RemoteNode() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        if (args[0].equals("producer")) {
            producer(Integer.parseInt(args[1]), Long.parseLong(args[2]), Path.of(args[3]));
        } else {
            consumer(Path.of(args[1]), Path.of(args[2]));
        }
    }

    /** Mostly small tensors, some up to 2 MiB, one in a hundred 4 to 32 MiB, and every 1000th exactly 32 MiB. */
    static long sizeOf(int seq, long seed) {
        if (seq % 1000 == 500) {
            return 32L << 20;
        }
        SplittableRandom random = new SplittableRandom(seed * 1_000_003L + seq);
        double p = random.nextDouble();
        int shift = p < 0.9 ? random.nextInt(5) : p < 0.99 ? 5 + random.nextInt(5) : 10 + random.nextInt(3);
        long base = 4096L << shift;
        return base + (random.nextLong(base) & ~7L);
    }

    static void fill(MemorySegment data, int seq) {
        long x = seq * 0x9E3779B97F4A7C15L + 1;
        for (long at = HEADER; at + 8 <= data.byteSize(); at += 8) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            data.set(ValueLayout.JAVA_LONG_UNALIGNED, at, x);
        }
        data.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
        data.set(ValueLayout.JAVA_LONG_UNALIGNED, 8, crc(data));
    }

    /** Whether {@code data} is what {@link #fill} wrote for {@code seq}. */
    static boolean intact(MemorySegment data, long seq) {
        return data.byteSize() >= HEADER && data.get(ValueLayout.JAVA_LONG_UNALIGNED, 0) == seq
            && data.get(ValueLayout.JAVA_LONG_UNALIGNED, 8) == crc(data);
    }

    private static long crc(MemorySegment data) {
        CRC32C crc = new CRC32C();
        crc.update(data.asSlice(HEADER).asByteBuffer());
        return crc.getValue();
    }

    private static void producer(int count, long seed, Path acksFile) throws Exception {
        Deployment deployment = Deployment.fromEnvironment("pipe", "prefill");
        long timeoutMs = deployment.config().remote().timeout().toMillis();
        Map<UUID, Integer> seqOf = new HashMap<>();
        long[] sentAt = new long[count];
        long[] ackedAt = new long[count];
        int[] resends = {0, 0};
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment, transport);
             Arena arena = Arena.ofConfined()) {
            if (!mailbox.awaitPeer("decode", Duration.ofSeconds(60))) {
                System.out.println("RESULT error=decode-never-connected");
                System.exit(2);
            }
            MemorySegment buffer = arena.allocate(32L << 20, 64);
            TensorChannel.Listener acks = new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                    transport.ack(from, uuids);
                    for (UUID uuid : uuids) {
                        Integer seq = seqOf.remove(uuid);
                        if (seq != null && ackedAt[seq] == 0) {
                            ackedAt[seq] = System.currentTimeMillis();
                        }
                    }
                }
            };
            for (int seq = 0; seq < count; seq++) {
                send(transport, mailbox, buffer, seq, seed, seqOf, resends);
                sentAt[seq] = System.currentTimeMillis();
                mailbox.poll(acks, 64);
            }
            long deadline = System.currentTimeMillis() + 240_000;
            int unconfirmed = count;
            while (unconfirmed > 0 && System.currentTimeMillis() < deadline) {
                mailbox.receive(acks, Duration.ofMillis(100));
                unconfirmed = 0;
                long now = System.currentTimeMillis();
                for (int seq = 0; seq < count; seq++) {
                    if (ackedAt[seq] == 0) {
                        unconfirmed++;
                        if (now - sentAt[seq] > timeoutMs + 2000) { // timed out: freed by the transport, send again
                            send(transport, mailbox, buffer, seq, seed, seqOf, resends);
                            sentAt[seq] = System.currentTimeMillis();
                            resends[1]++;
                        }
                    }
                }
            }
            StringBuilder lines = new StringBuilder();
            for (int seq = 0; seq < count; seq++) {
                lines.append(seq).append(' ').append(ackedAt[seq]).append('\n');
            }
            Files.writeString(acksFile, lines);
            RemoteStats remote = ((RoutedMailbox) mailbox).remoteStats();
            System.out.println("RESULT confirmed=" + (count - unconfirmed) + " retriedAfterFailure=" + resends[0]
                + " resentAfterTimeout=" + resends[1] + " inFlight=" + transport.statsSummary().inFlight()
                + " deadConsumerReclaims=" + transport.statsSummary().deadConsumerReclaims() + " "
                + remote.toLogLine());
            if (unconfirmed > 0) {
                System.exit(1);
            }
        }
    }

    // Sends one tensor; when the consumer's node does not take it, waits for it and sends the same descriptors again.
    private static void send(TensorTransport transport, TensorChannel mailbox, MemorySegment buffer, int seq, long seed,
                             Map<UUID, Integer> seqOf, int[] resends) throws InterruptedException {
        MemorySegment data = buffer.asSlice(0, sizeOf(seq, seed));
        fill(data, seq);
        List<TensorDescriptor> sent = transport.send("s" + seq, List.of(Tensor.of(DType.U8, data, data.byteSize())));
        seqOf.put(sent.getFirst().uuid(), seq);
        while (true) {
            try {
                mailbox.sendDescriptors("decode", sent);
                return;
            } catch (PeerUnavailableException e) {
                resends[0]++;
                System.out.println("send of " + seq + " failed, waiting for decode: " + e.getMessage());
                mailbox.awaitPeer("decode", Duration.ofSeconds(60));
            }
        }
    }

    private static void consumer(Path receivedFile, Path stopFile) throws Exception {
        Deployment deployment = Deployment.fromEnvironment("pipe", "decode");
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment);
             BufferedWriter out = Files.newBufferedWriter(receivedFile, StandardOpenOption.CREATE,
                 StandardOpenOption.APPEND)) {
            System.out.println("READY");
            long[] lastArrival = {System.nanoTime()};
            TensorChannel.Listener listener = new TensorChannel.Listener() {
                @Override
                public void descriptors(String from, List<TensorDescriptor> batch) {
                    try {
                        for (TensorDescriptor d : batch) {
                            try (ReceivedTensor t = transport.receive(d)) {
                                MemorySegment data = t.data();
                                long seq = data.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                                boolean intact = ("s" + seq).equals(d.requestId())
                                    && data.get(ValueLayout.JAVA_LONG_UNALIGNED, 8) == crc(data);
                                out.write((intact ? "" : "BAD ") + d.requestId().substring(1) + "\n");
                                out.flush();
                            }
                        }
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                    mailbox.sendAcks(from, batch.stream().map(TensorDescriptor::uuid).toList());
                    lastArrival[0] = System.nanoTime();
                }

                @Override
                public void acks(String from, List<UUID> uuids) {
                }
            };
            while (!Files.exists(stopFile) || System.nanoTime() - lastArrival[0] < 1_000_000_000L) {
                mailbox.receive(listener, Duration.ofMillis(100));
            }
            System.out.println("RESULT " + ((RoutedMailbox) mailbox).remoteStats().toLogLine());
        }
    }
}
