package io.mstar.transport.shm;

/**
 * Told when a segment is mapped and before it is unmapped, so that what holds its address (a CUDA host
 * registration) is released before the address goes away. Must not throw: failures are the listener's
 * to log.
 */
public interface MappingListener {
    MappingListener NONE = new MappingListener() {
        @Override
        public void mapped(MappedSegment segment) {
        }

        @Override
        public void unmapping(MappedSegment segment) {
        }
    };

    void mapped(MappedSegment segment);

    void unmapping(MappedSegment segment);
}
