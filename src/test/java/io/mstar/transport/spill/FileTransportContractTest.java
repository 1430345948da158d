package io.mstar.transport.spill;

import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransportContract;
import io.mstar.transport.liveness.ConsumerLiveness;
import io.mstar.transport.staging.DeviceTransfers;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;

class FileTransportContractTest extends TensorTransportContract {
    @Override
    protected TensorTransport create(String entity) {
        return FileTransport.open(deployment(entity));
    }

    @Test
    void hasNeitherADevicePathNorConsumerLiveness() {
        TensorTransport files = open("producer");
        assertTrue(files.capability(DeviceTransfers.class).isEmpty());
        assertTrue(files.capability(ConsumerLiveness.class).isEmpty());
    }

    @Override
    protected void unlinkOwnedFiles(TensorTransport producer) {
        ((FileTransport) producer).unlinkOwnedFiles();
    }
}
