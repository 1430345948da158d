package quickstart;

import io.mstar.transport.Deployment;
import io.mstar.transport.TensorEndpoint;

import java.time.Duration;

/** Receives one tensor, reads it in place, and lets the endpoint ACK it when the handler returns. */
public class Consumer {
    public static void main(String[] args) {
        Deployment deployment = Deployment.fromEnvironment("my-pipeline", "consumer");
        int read;
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
            read = endpoint.receive(tensor -> System.out.println("consumer: " + tensor.requestId() + " from "
                + tensor.from() + ", " + tensor.dtype() + " " + tensor.nbytes() + " bytes, read in place"),
                Duration.ofSeconds(60));
        }
        System.exit(read > 0 ? 0 : 1);
    }
}
