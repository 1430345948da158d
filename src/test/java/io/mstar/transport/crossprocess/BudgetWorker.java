package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportStats;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * One worker of {@link NodeBudgetTest}, configured by its environment: it sends {@code COUNT} tensors of 1 MiB
 * that nobody ACKs (each one a slot it keeps, or a spill file), as a worker filling its own arena would, prints
 * {@code FILLED sent=.. spills=..}, and keeps them until its standard input closes (its parent ends it) or a
 * signal stops it.
 */
public final class BudgetWorker {
    private BudgetWorker() {
    }

    public static void main(String[] args) throws Exception {
        Deployment deployment = Deployment.fromEnvironment("budget", args[0]);
        int count = Integer.parseInt(args[1]);
        try (TensorTransport transport = TensorTransports.create(deployment, false)) {
            MemorySegment bytes = MemorySegment.ofArray(new byte[1 << 20]);
            for (int i = 0; i < count; i++) {
                transport.send("t" + i, List.of(Tensor.of(DType.U8, bytes, bytes.byteSize())));
            }
            TransportStats stats = transport.statsSummary();
            System.out.println("FILLED sent=" + stats.tensorsSent() + " spills=" + stats.spills());
            new BufferedReader(new InputStreamReader(System.in)).readLine(); // until the parent closes it, or dies
        }
    }
}
