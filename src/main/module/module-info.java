/**
 * mstar-transport: tensors between processes of one machine through a shared-memory arena.
 * Only the root package is API; the others are implementation.
 */
module io.mstar.transport {
    requires org.slf4j;
    requires org.agrona;
    requires com.sun.jna; // the CUDA binding (package cuda), loaded on the first device call
    exports io.mstar.transport;
}
