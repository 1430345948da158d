package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.lifecycle.ParentWatch;

import java.io.BufferedWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.SplittableRandom;

/**
 * One node of the cross-node campaign, configured by its environment. {@code producer seed stopFile}: entity
 * "prefill" posts to "decode" about 100 tensors a second (4 KiB, 64 KiB or 256 KiB, up to 32 awaiting their
 * outcome), each first sent through an API the seed picks (post of a tensor, post of a writer, a claim filled
 * and posted), reposts every tensor whose outcome is a failure ({@link TensorEndpoint#repost}) until it is
 * delivered, and once the stop file appears sends nothing new and waits for what is outstanding. Request ids are
 * {@code s<seq>/<attempt>}; it prints {@code OUTCOME seq attempt status failure wallMs} once per send.
 * {@code consumer receivedFile stopFile}: entity "decode" writes {@code seq attempt wallMs} per tensor its handler
 * sees ({@code BAD requestId} for one whose bytes are wrong) until the stop file appears and a second passes with
 * nothing.
 */
public final class CampaignNode {
    private static final long[] SIZES = {4 << 10, 64 << 10, 256 << 10};
    private static final int WINDOW = 32;
    private static final long PERIOD_NS = 10_000_000L;

    private CampaignNode() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        if (args[0].equals("producer")) {
            producer(Long.parseLong(args[1]), Path.of(args[2]));
        } else {
            consumer(Path.of(args[1]), Path.of(args[2]));
        }
    }

    /** An outcome to act on: the send of {@code seq}'s {@code attempt}, which failed (or was delivered). */
    private record Outcome(int seq, int attempt, long msb, long lsb, Delivery.Failure failure) {
    }

    private static void producer(long seed, Path stop) throws Exception {
        ArrayDeque<Outcome> outcomes = new ArrayDeque<>(); // told on this thread only: no lock
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                told(requestId, uuidMsb, uuidLsb, null);
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                told(requestId, uuidMsb, uuidLsb, failure);
                System.out.println("DETAIL " + requestId + " " + detail);
            }

            private void told(String requestId, long msb, long lsb, Delivery.Failure failure) {
                int slash = requestId.indexOf('/');
                Outcome o = new Outcome(Integer.parseInt(requestId.substring(1, slash)),
                    Integer.parseInt(requestId.substring(slash + 1)), msb, lsb, failure);
                outcomes.add(o);
                System.out.println("OUTCOME " + o.seq + " " + o.attempt + " " + (failure == null ? "DELIVERED - "
                    : "FAILED " + failure + " ") + System.currentTimeMillis());
            }

            @Override
            public boolean toldWhenPolled() {
                return true;
            }
        };
        SplittableRandom random = new SplittableRandom(seed);
        int[] apiUses = new int[3];
        int reposts = 0;
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.fromEnvironment("pipe", "prefill"), listener);
             Arena arena = Arena.ofConfined()) {
            if (!endpoint.awaitPeer("decode", Duration.ofSeconds(60))) {
                System.out.println("RESULT error=decode-never-connected");
                System.exit(2);
            }
            MemorySegment buffer = arena.allocate(SIZES[SIZES.length - 1], 64);
            int seq = 0;
            int outstanding = 0;
            long next = System.nanoTime();
            long stoppedAt = 0;
            while (stoppedAt == 0 || outstanding > 0) {
                if (stoppedAt == 0 && Files.exists(stop)) {
                    stoppedAt = System.nanoTime();
                }
                if (stoppedAt != 0 && System.nanoTime() - stoppedAt > 180_000_000_000L) {
                    System.out.println("RESULT error=outstanding-after-stop outstanding=" + outstanding);
                    System.exit(3);
                }
                for (Outcome o; (o = outcomes.poll()) != null; ) {
                    if (o.failure == null) {
                        outstanding--;
                        continue;
                    }
                    MemorySegment data = fill(buffer, o.seq, seed);
                    endpoint.repost("decode", "s" + o.seq + "/" + (o.attempt + 1), Tensor.of(DType.U8, data,
                        data.byteSize()), o.msb, o.lsb);
                    reposts++;
                }
                if (stoppedAt == 0 && outstanding < WINDOW && System.nanoTime() - next >= 0) {
                    MemorySegment data = fill(buffer, seq, seed);
                    String requestId = "s" + seq + "/0";
                    int api = random.nextInt(3);
                    apiUses[api]++;
                    switch (api) {
                        case 0 -> endpoint.post("decode", requestId, Tensor.of(DType.U8, data, data.byteSize()));
                        case 1 -> endpoint.post("decode", requestId, DType.U8, new long[] {data.byteSize()},
                            room -> MemorySegment.copy(data, 0, room, 0, data.byteSize()));
                        default -> {
                            TensorClaim claim = endpoint.claim(requestId, DType.U8, data.byteSize());
                            MemorySegment.copy(data, 0, claim.memory(), 0, data.byteSize());
                            endpoint.post("decode", claim);
                        }
                    }
                    seq++;
                    outstanding++;
                    next = Math.max(next + PERIOD_NS, System.nanoTime() - 10 * PERIOD_NS); // no long burst after a wait
                }
                endpoint.awaitOutcomes(64, Duration.ofMillis(2));
            }
            System.out.println("RESULT sent=" + seq + " reposts=" + reposts + " posts=" + apiUses[0] + " writers="
                + apiUses[1] + " claims=" + apiUses[2] + " " + endpoint.remoteStats().orElseThrow().toLogLine());
        }
    }

    private static MemorySegment fill(MemorySegment buffer, int seq, long seed) {
        MemorySegment data = buffer.asSlice(0, SIZES[new SplittableRandom(seed * 31 + seq).nextInt(SIZES.length)]);
        RemoteNode.fill(data, seq);
        return data;
    }

    private static void consumer(Path receivedFile, Path stop) throws Exception {
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.fromEnvironment("pipe", "decode"));
             BufferedWriter out = Files.newBufferedWriter(receivedFile, StandardOpenOption.CREATE,
                 StandardOpenOption.APPEND)) {
            System.out.println("READY " + System.currentTimeMillis());
            long[] lastArrival = {System.nanoTime()};
            TensorHandler handler = t -> {
                String id = t.requestId().toString();
                int slash = id.indexOf('/');
                int seq = Integer.parseInt(id.substring(1, slash));
                try {
                    out.write((RemoteNode.intact(t.data(), seq) ? seq + " " + id.substring(slash + 1) + " "
                        + System.currentTimeMillis() : "BAD " + id) + "\n");
                    out.flush();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
                lastArrival[0] = System.nanoTime();
            };
            while (!Files.exists(stop) || System.nanoTime() - lastArrival[0] < 1_000_000_000L) {
                endpoint.receive(handler, Duration.ofMillis(100));
            }
            System.out.println("RESULT " + endpoint.remoteStats().orElseThrow().toLogLine());
        }
    }
}
