package io.mstar.transport.transport;

import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransportContract;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.arena.ArenaTransport;
import io.mstar.transport.arena.SegmentedArena;
import io.mstar.transport.lifecycle.Namespace;

import java.util.Map;

class ArenaTransportContractTest extends TensorTransportContract {
    @Override
    protected TensorTransport create(String entity) {
        TransportConfig config = TransportConfig.from(Map.of(TransportConfig.SHM_DIR, shm.path().toString())::get);
        return new ArenaTransport(config,
            new SegmentedArena(shm.path(), Namespace.of(null, "contract"), entity, 4 << 20, 4), false);
    }
}
