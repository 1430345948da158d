package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.lifecycle.ParentWatch;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.time.Duration;

/**
 * One process of {@link NodeMovedTest}, configured by its environment: {@code consumer} receives for ever;
 * {@code producer} posts a 4 KiB tensor every 20 ms to "consumer" and prints {@code DELIVERED <wall ms>} or
 * {@code FAILED <failure>} per outcome.
 */
public final class MovingNode {
    private static final PrintStream OUT = new PrintStream(System.out, true);

    private MovingNode() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Deployment deployment = Deployment.fromEnvironment("moving", args[0]);
        if (args[0].equals("consumer")) {
            try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
                OUT.println("READY " + System.currentTimeMillis());
                while (true) {
                    endpoint.receive(t -> { }, Duration.ofSeconds(1));
                }
            }
        }
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                OUT.println("DELIVERED " + System.currentTimeMillis());
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                OUT.println("FAILED " + failure + " " + detail);
            }
        };
        Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096);
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, listener)) {
            OUT.println("READY " + System.currentTimeMillis());
            for (long i = 0; ; i++) {
                try {
                    endpoint.post("consumer", "t" + i, tensor);
                } catch (RuntimeException e) {
                    OUT.println("THREW " + e);
                }
                Thread.sleep(20);
            }
        }
    }
}
