package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.lifecycle.ParentWatch;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A producer as a service writes one (entity "prefill", configured by its environment): 50 tensors a second to
 * "decode" through the endpoint, each awaited before the next, until the stop file appears. Prints one line per
 * send, {@code OUTCOME seq startMs endMs tookMs status failure}, wall-clock times so that the test can place them
 * against the moment the link went down or came back, and {@code DETAIL seq text} for a failure's detail.
 */
public final class SteadyProducer {
    private static final long PERIOD_MS = 20;

    private SteadyProducer() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Path stop = Path.of(args[0]);
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.fromEnvironment("pipe", "prefill"));
             Arena arena = Arena.ofConfined()) {
            if (!endpoint.awaitPeer("decode", Duration.ofSeconds(60))) {
                System.out.println("RESULT error=decode-never-connected");
                System.exit(2);
            }
            MemorySegment data = arena.allocate(64 << 10, 64);
            long next = System.nanoTime();
            for (int seq = 0; !Files.exists(stop); seq++) {
                RemoteNode.fill(data, seq);
                long startMs = System.currentTimeMillis();
                long start = System.nanoTime();
                Delivery delivery = endpoint.send("decode", "s" + seq, Tensor.of(DType.U8, data, data.byteSize()));
                delivery.await(Duration.ofMinutes(1));
                long took = (System.nanoTime() - start) / 1_000_000;
                System.out.println("OUTCOME " + seq + " " + startMs + " " + System.currentTimeMillis() + " " + took + " "
                    + delivery.status() + " " + delivery.failure());
                if (delivery.status() == Delivery.Status.FAILED) {
                    System.out.println("DETAIL " + seq + " " + delivery.detail());
                }
                next += PERIOD_MS * 1_000_000L;
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                } else {
                    next = System.nanoTime(); // behind (a send waited): go on from now, no burst to catch up
                }
            }
        }
        System.out.println("RESULT done");
    }
}
