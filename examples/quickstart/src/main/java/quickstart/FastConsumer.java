package quickstart;

import io.mstar.transport.Deployment;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorHandler;

import java.lang.foreign.ValueLayout;
import java.time.Duration;

/** The fast path's consumer: reads each tensor's fields and bytes in place; the endpoint ACKs on return. */
public class FastConsumer {
    public static void main(String[] args) {
        long count = args.length > 0 ? Long.parseLong(args[0]) : 100_000;
        long[] seen = {0, 0}; // tensors, bytes that differ from their tensor's first byte
        TensorHandler handler = tensor -> {
            byte first = tensor.memory().get(ValueLayout.JAVA_BYTE, tensor.offset());
            byte last = tensor.memory().get(ValueLayout.JAVA_BYTE, tensor.offset() + tensor.nbytes() - 1);
            seen[1] += first == last ? 0 : 1;
            seen[0]++;
        };
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.fromEnvironment("fast-pipeline", "consumer"))) {
            while (seen[0] < count && endpoint.receive(handler, Duration.ofSeconds(30)) > 0) {
                // each receive hands over what waits, up to 64 messages
            }
        }
        System.out.println("consumer: received=" + seen[0] + " torn=" + seen[1]);
        System.exit(seen[0] == count && seen[1] == 0 ? 0 : 1);
    }
}
