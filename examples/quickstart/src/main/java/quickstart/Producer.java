package quickstart;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;

import java.lang.foreign.MemorySegment;
import java.time.Duration;

/** Sends one image-sized tensor to the entity "consumer" and prints what became of it. */
public class Producer {
    public static void main(String[] args) throws InterruptedException {
        Deployment deployment = Deployment.fromEnvironment("my-pipeline", "producer");
        Delivery.Status status;
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            if (!endpoint.awaitPeer("consumer", Duration.ofSeconds(30))) {
                throw new IllegalStateException("the consumer did not start");
            }
            MemorySegment pixels = MemorySegment.ofArray(new float[3 * 224 * 224]); // your tensor's bytes
            Tensor image = Tensor.of(DType.F32, pixels, 3, 224, 224);
            Delivery delivery = endpoint.send("consumer", "request-1", image);
            status = delivery.await(Duration.ofSeconds(30)); // DELIVERED once the consumer is done
            System.out.println("producer: " + delivery);
        }
        System.exit(status == Delivery.Status.DELIVERED ? 0 : 1);
    }
}
