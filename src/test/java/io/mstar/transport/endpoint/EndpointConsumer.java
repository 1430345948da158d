package io.mstar.transport.endpoint;

import io.mstar.transport.Deployment;
import io.mstar.transport.ReceivedTensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.lifecycle.ParentWatch;

import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A consumer process on the endpoint: receives until its stop file appears, checks that every byte of each
 * tensor equals the tensor's first byte, and either lets the endpoint ACK (mode {@code ack}) or keeps every
 * tensor unACKed (mode {@code keep}). Prints {@code received=N bad=M} after each tensor.
 * Arguments: directory, endpoint, entity, mode.
 */
public final class EndpointConsumer {
    private EndpointConsumer() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Path dir = Path.of(args[0]);
        boolean keep = args[3].equals("keep");
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString(),
            TransportConfig.ARENA, "1")::get);
        Path stop = dir.resolve("stop-" + args[2]);
        List<ReceivedTensor> kept = new ArrayList<>();
        long[] counts = {0, 0};
        try (TensorEndpoint endpoint = TensorEndpoint.open(Deployment.of(config, args[1], args[2]))) {
            while (!Files.exists(stop)) {
                endpoint.receive(tensor -> {
                    byte first = tensor.memory().get(ValueLayout.JAVA_BYTE, tensor.offset());
                    for (long i = 0; i < tensor.nbytes(); i++) {
                        if (tensor.memory().get(ValueLayout.JAVA_BYTE, tensor.offset() + i) != first) {
                            counts[1]++;
                            break;
                        }
                    }
                    counts[0]++;
                    if (keep) {
                        kept.add(tensor.keep());
                    }
                    System.out.println("received=" + counts[0] + " bad=" + counts[1]);
                }, Duration.ofMillis(50));
            }
        }
    }
}
