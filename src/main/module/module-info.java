/**
 * mstar-transport: tensors between processes of one machine through a shared-memory arena.
 * The API is the root package, the descriptor codec (for applications that carry descriptors on a
 * channel of their own), the ONNX Runtime adapter and the Micrometer binder; the other packages are implementation.
 */
module io.mstar.transport {
    requires java.management; // each transport's MXBean
    requires org.slf4j;
    requires org.agrona;
    requires com.sun.jna; // the CUDA binding (package cuda), loaded on the first device call
    requires static com.microsoft.onnxruntime; // the ONNX Runtime adapter, for those who add ORT
    requires static micrometer.core; // the Micrometer binder, for those who add Micrometer
    requires static io.aeron.client; // the cross-node path, for those who set MSTAR_REMOTE_*
    requires static io.aeron.driver; // its embedded media driver
    exports io.mstar.transport;
    exports io.mstar.transport.codec;
    exports io.mstar.transport.onnx;
    exports io.mstar.transport.micrometer;
}
