package io.mstar.transport.transport;

import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransportContract;
import io.mstar.transport.lifecycle.Namespace;
import io.mstar.transport.spill.FileTransport;

class FileTransportContractTest extends TensorTransportContract {
    @Override
    protected TensorTransport create(String entity) {
        return new FileTransport(shm.path(), Namespace.of(null, "contract"), entity);
    }
}
