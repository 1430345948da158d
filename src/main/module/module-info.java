/**
 * mstar-transport: tensors between processes of one machine through a shared-memory arena.
 * The API is the root package and the descriptor codec (for applications that carry descriptors on a
 * channel of their own); the other packages are implementation.
 */
module io.mstar.transport {
    requires org.slf4j;
    requires org.agrona;
    requires com.sun.jna; // the CUDA binding (package cuda), loaded on the first device call
    exports io.mstar.transport;
    exports io.mstar.transport.codec;
}
