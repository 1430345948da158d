package io.mstar.transport.arena;

import io.mstar.transport.Deployment;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransportContract;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.staging.DeviceTransfers;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

class ArenaTransportContractTest extends TensorTransportContract {
    @Override
    protected TensorTransport create(String entity) {
        Deployment deployment = deployment(entity);
        return new ArenaTransport(deployment.config(), new SegmentedArena(Owner.of(deployment), 4 << 20, 4,
            deployment.config().reclaimInterval()), false);
    }

    @Test
    void offersTheDevicePathAndConsumerLiveness() {
        TensorTransport arena = open("producer");
        assertTrue(arena.capability(DeviceTransfers.class).isPresent());
        assertTrue(arena.capability(ConsumerLiveness.class).isPresent());
    }

    @Override
    protected void unlinkOwnedFiles(TensorTransport producer) {
        ((ArenaTransport) producer).unlinkOwnedFiles();
    }
}
