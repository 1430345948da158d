package io.mstar.transport.chaos;

import io.mstar.transport.DType;
import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A consumer told to stop (SIGTERM) while its handler still reads a tensor in place (its own shutdown hook lets
 * the handler finish): it must not look dead to its producer, which then frees and reuses the slot, until the
 * handler has returned. The negative control drops the mailbox's lock at once (a test-only seam): the producer
 * then takes the consumer for dead, and frees its tensor, while the handler still reads it.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class StoppingConsumerTest {
    private static final long NBYTES = 1 << 20;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void aConsumerStoppingMidHandlerLooksAliveUntilItsHandlerReturns() throws Exception {
        String told = run(List.of());
        assertTrue(told.contains("GOOD t-0"), "the handler should be done when its producer decides: " + told);
    }

    @Test
    void withoutTheWaitTheProducerFreesTheTensorWhileTheHandlerStillReadsIt() throws Exception {
        String told = run(List.of("-Dmstar.test.noDispatchWait=true"));
        assertTrue(!told.contains("GOOD t-0") && !told.contains("BAD t-0"),
            "negative control: the producer should decide while the handler runs: " + told);
    }

    // Returns the producer's outcome for t-0 and what the consumer had printed when it came.
    private String run(List<String> seams) throws Exception {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "1");
        TransportConfig config = TransportConfig.from(env::get);
        ChildJvm slow = ChildJvm.start(true, seams, env, ChaosWorker.class, "slow-consumer", "slow", "1");
        CompletableFuture<String> outcome = new CompletableFuture<>();
        DeliveryListener listener = new DeliveryListener() {
            @Override
            public void delivered(String requestId, long uuidMsb, long uuidLsb) {
                tell(requestId, "DELIVERED");
            }

            @Override
            public void failed(String requestId, long uuidMsb, long uuidLsb, Delivery.Failure failure, String detail) {
                tell(requestId, failure.toString());
            }

            private void tell(String requestId, String what) {
                if (requestId.equals("t-0")) {
                    try {
                        outcome.complete(what + ", the consumer had printed: " + slow.output());
                    } catch (java.io.IOException e) {
                        outcome.completeExceptionally(e);
                    }
                }
            }
        };
        try (TensorEndpoint producer = TensorEndpoint.open(Deployment.of(config, "chaos", "p"), listener)) {
            assertTrue(producer.awaitPeer("slow", Duration.ofSeconds(60)), slow.output());
            producer.post("slow", "t-0", tensor("t-0"));
            slow.awaitOutput("IN t-0", 60);
            slow.process().destroy(); // SIGTERM mid-handler
            String told = outcome.get(30, TimeUnit.SECONDS);
            slow.await(30);
            return told;
        } finally {
            slow.process().destroyForcibly().waitFor();
        }
    }

    private static Tensor tensor(String id) {
        MemorySegment data = MemorySegment.ofArray(new byte[(int) NBYTES]);
        ChaosWorker.fill(data, NBYTES, id);
        return Tensor.of(DType.U8, data, NBYTES);
    }
}
