package quickstart;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.TensorClaim;
import io.mstar.transport.TensorEndpoint;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/** The fast path: claims room, writes each tensor in place, posts it; outcomes come to a listener. */
public class FastProducer {
    public static void main(String[] args) throws InterruptedException {
        long count = args.length > 0 ? Long.parseLong(args[0]) : 100_000;
        AtomicLong delivered = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        DeliveryListener outcomes = new DeliveryListener() {
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                delivered.incrementAndGet();
            }

            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure why, String detail) {
                failed.incrementAndGet();
            }
        };
        Deployment deployment = Deployment.fromEnvironment("fast-pipeline", "producer");
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, outcomes)) {
            endpoint.awaitPeer("consumer", Duration.ofSeconds(30));
            endpoint.prepareToSend(); // the first segment now, not at the first claim
            for (long i = 0; i < count; i++) {
                try (TensorClaim claim = endpoint.claim("step", DType.F32, 256)) {
                    claim.memory().fill((byte) i); // write the tensor in place: no copy
                    endpoint.post("consumer", claim);
                }
            }
            while (delivered.get() + failed.get() < count) {
                Thread.sleep(1);
            }
        }
        System.out.println("producer: delivered=" + delivered + " failed=" + failed);
        System.exit(failed.get() == 0 ? 0 : 1);
    }
}
