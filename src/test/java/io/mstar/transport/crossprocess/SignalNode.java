package io.mstar.transport.crossprocess;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.lifecycle.ParentWatch;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One process of {@link SignalTest}, configured by its environment: it opens a transport and a mailbox
 * (with an embedded Aeron media driver when {@code MSTAR_REMOTE_*} is set) and then, by its argument,
 * waits for a peer that never comes ({@code await}), sleeps ({@code open}) or sends without end
 * ({@code send}), until a signal stops it. It prints READY once open.
 */
public final class SignalNode {
    private SignalNode() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.exitWhenParentDies();
        Deployment deployment = Deployment.fromEnvironment("signals", "me");
        try (TensorTransport transport = TensorTransports.create(deployment, false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment, transport)) {
            System.out.println("READY");
            switch (args[0]) {
                case "await" -> mailbox.awaitPeer("far", Duration.ofSeconds(120));
                case "open" -> Thread.sleep(120_000);
                default -> sendWithoutEnd(transport);
            }
        }
    }

    // Slots and spill files in flight all the time: half of what it sends is ACKed, in batches.
    private static void sendWithoutEnd(TensorTransport transport) {
        MemorySegment bytes = MemorySegment.ofArray(new byte[3 << 20]);
        List<TensorDescriptor> unacked = new ArrayList<>();
        for (long i = 0; ; i++) {
            long size = 4096L << (i % 10);
            unacked.addAll(transport.send("r" + i, List.of(Tensor.of(DType.U8, bytes.asSlice(0, size), size))));
            if (unacked.size() >= 8) {
                transport.ack(unacked.subList(0, 4).stream().map(TensorDescriptor::uuid).toList());
                unacked.subList(0, 4).clear();
            }
        }
    }
}
