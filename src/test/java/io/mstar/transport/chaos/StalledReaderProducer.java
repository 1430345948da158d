package io.mstar.transport.chaos;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.lifecycle.ParentWatch;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The producer of {@link StalledRemoteReaderTest}: once the remote consumer {@code slow} has stopped reading
 * (the test stops it, then creates the go file), it sends it tensors of 32 MiB that time out, then sends
 * tensors of the same size to the local consumer {@code fast}, which take the slots the timed-out ones had.
 * Usage: {@code GO_FILE}.
 */
public final class StalledReaderProducer {
    static final long NBYTES = Long.getLong("stalled.mb", 32) << 20;
    private static final PrintStream OUT = new PrintStream(System.out, true);

    private StalledReaderProducer() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Path go = Path.of(args[0]);
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                OUT.println("OUT " + requestId + " DELIVERED");
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                OUT.println("OUT " + requestId + " FAILED " + failure);
            }
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.fromEnvironment("chaos", "p"), listener)) {
            if (!endpoint.awaitPeer("slow", Duration.ofSeconds(30)) || !endpoint.awaitPeer("fast", Duration.ofSeconds(30))) {
                throw new IllegalStateException("the consumers did not start");
            }
            OUT.println("READY p");
            while (Files.notExists(go)) {
                Thread.sleep(10);
            }
            for (int i = 0; i < Integer.getInteger("stalled.count", 3); i++) {
                endpoint.post("slow", "s-" + i, tensor("s-" + i)); // the first ones queue; a later one times out
            }
            Thread.sleep(3000); // their timeout passes: the slots are freed (once nothing can still send them)
            for (int i = 0; i < 2 * Integer.getInteger("stalled.count", 3); i++) {
                Delivery d = endpoint.send("fast", "f-" + i, tensor("f-" + i));
                OUT.println("FAST " + d.await(Duration.ofSeconds(30)));
            }
            OUT.println("DONE");
            Thread.sleep(5000); // the stalled reader resumes meanwhile: whatever is still queued goes now
        }
    }

    private static Tensor tensor(String id) {
        MemorySegment data = MemorySegment.ofArray(new byte[(int) NBYTES]);
        ChaosWorker.fill(data, NBYTES, id);
        return Tensor.of(DType.U8, data, NBYTES);
    }
}
