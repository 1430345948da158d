package io.mstar.transport.xbench;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.IncomingTensor;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;
import io.mstar.transport.TransportConfig;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;

/**
 * One worker of the scale benchmark ({@link ScaleBench}), through the exported API as a user's worker calls it.
 * A producer claims, fills and posts to its consumers in turn, at most a window in flight (a semaphore its
 * listener releases, which also records each payload's send-to-outcome time); a consumer checks every byte in
 * place. The payload, its check and the measured windows are {@link ScaleWindows}'.
 */
final class ScalePeer {
    private ScalePeer() {
    }

    static Deployment deployment(String dir, String entity) {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, dir, TransportConfig.ARENA, "1",
            TransportConfig.MAX_SEGMENTS, "4", TransportConfig.SEGMENT_MB, "64");
        return Deployment.of(TransportConfig.from(env::get), "mstar-scale", entity);
    }

    /** {@code consumer ENTITY DIR SIZE}: receives until its input ends; prints {@code RESULT received=N bad=M}. */
    static void consumer(String entity, String dir, long size) throws Exception {
        ScaleWindows.Check check = new ScaleWindows.Check(size);
        // A view per tensor: a handler's memory() is a new segment each call (scoped to the call), never to be cached.
        TensorHandler handler = (IncomingTensor t) -> check.check(t.memory().asSlice(t.offset(), t.nbytes()).asByteBuffer());
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment(dir, entity))) {
            System.out.println("READY");
            Thread stop = untilInputEnds();
            while (stop.isAlive()) {
                endpoint.receive(handler, Duration.ofMillis(100));
            }
        }
        System.out.println(check.result());
    }

    /** A thread that ends when the launcher closes this worker's input, as it does when the cell ends. */
    static Thread untilInputEnds() {
        return Thread.ofPlatform().daemon().start(() -> {
            try {
                while (System.in.read() >= 0) {
                    Thread.onSpinWait();
                }
            } catch (Exception ignored) {
                // ends the same way
            }
        });
    }

    /**
     * {@code producer ENTITY DIR SIZE SECONDS CONSUMER,... ID RUNS WINDOW}: posts from the go file on, at most
     * WINDOW in flight, and measures RUNS windows of SECONDS from the measure file on ({@link ScaleWindows}).
     */
    static void producer(String entity, String dir, long size, List<String> consumers, long id, int window,
                         ScaleWindows windows) throws Exception {
        Semaphore places = new Semaphore(window);
        long[] sentAt = new long[2 * window];
        Map<String, Integer> slotOf = new HashMap<>();
        String[] ids = new String[sentAt.length];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = "s" + i;
            slotOf.put(ids[i], i);
        }
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                windows.record(System.nanoTime() - sentAt[slotOf.get(requestId)]);
                places.release();
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.err.println("not delivered: " + requestId + " " + failure + " " + detail);
                System.exit(3);
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment(dir, entity), listener)) {
            for (String c : consumers) {
                if (!endpoint.awaitPeer(c, Duration.ofSeconds(60))) {
                    throw new IllegalStateException("consumer did not start: " + c);
                }
            }
            endpoint.prepareToSend();
            System.out.println("READY");
            windows.awaitGo();
            long[] shape = {size};
            for (long seq = 0; windows.goOn(seq); seq++) {
                places.acquire();
                int slot = (int) (seq % sentAt.length);
                try (TensorClaim claim = endpoint.claim(ids[slot], DType.U8, shape)) {
                    ScaleWindows.fill(claim.memory(), id, seq);
                    sentAt[slot] = System.nanoTime();
                    endpoint.post(consumers.get((int) (seq % consumers.size())), claim);
                }
            }
            places.acquire(window); // every outcome, before the endpoint closes
        }
    }

}
