package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.lifecycle.ParentWatch;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One process of {@link IdleCostTest}, configured by its environment: a {@code consumer} that calls
 * {@code receive} for ever, or a {@code producer} that posts a tensor, then reads commands on its standard
 * input: {@code wake N MS} posts N tensors, one every MS ms after the endpoint went idle, and prints each one's
 * post-to-outcome time (a wake-up from idle on both sides: the consumer's receive and the producer's ACK thread);
 * an empty line or the end of input ends it. Prints {@code IDLE} when it has nothing in flight.
 */
public final class IdleWorker {
    private IdleWorker() {
    }

    public static void main(String[] args) throws Exception {
        Deployment deployment = Deployment.fromEnvironment("idle", args[0]);
        if (args[0].equals("consumer")) {
            ParentWatch.exitWhenParentDies();
            try (TensorEndpoint endpoint = TensorEndpoint.open(deployment)) {
                System.out.println("READY");
                while (true) {
                    endpoint.receive(t -> { }, Duration.ofSeconds(10));
                }
            }
        }
        BlockingQueue<Long> told = new ArrayBlockingQueue<>(16);
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                told.add(System.nanoTime());
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                System.out.println("FAILED " + requestId + " " + failure + " " + detail);
            }
        };
        Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096);
        try (TensorEndpoint endpoint = TensorEndpoint.open(deployment, listener)) {
            if (!endpoint.awaitPeer("consumer", Duration.ofSeconds(60))) {
                throw new IllegalStateException("no consumer");
            }
            endpoint.post("consumer", "first", tensor);
            told.poll(10, TimeUnit.SECONDS);
            System.out.println("IDLE");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String line;
            while ((line = in.readLine()) != null && !line.isEmpty()) {
                String[] cmd = line.split(" ");
                long[] micros = new long[Integer.parseInt(cmd[1])];
                for (int i = 0; i < micros.length; i++) {
                    Thread.sleep(Long.parseLong(cmd[2]));
                    long start = System.nanoTime();
                    endpoint.post("consumer", "wake-" + i, tensor);
                    Long at = told.poll(10, TimeUnit.SECONDS);
                    micros[i] = at == null ? -1 : (at - start) / 1000;
                }
                Arrays.sort(micros);
                System.out.println("WAKE p50=" + micros[micros.length / 2] + "us p99=" + micros[micros.length * 99 / 100]
                    + "us max=" + micros[micros.length - 1] + "us n=" + micros.length);
            }
        }
    }
}
