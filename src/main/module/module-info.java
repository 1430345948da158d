/**
 * mstar-transport: tensors between processes of one machine through a shared-memory arena.
 * The API is the root package (the endpoint, tensors, descriptors, configuration, stats, and the transport
 * and channel underneath), its exceptions, the descriptor codec and consumer liveness (for applications that
 * carry descriptors on a channel of their own), batch staging and the device path, the JMX interface, the
 * ONNX Runtime adapter and the Micrometer binder; the other packages are implementation.
 */
module io.mstar.transport {
    requires java.management; // each transport's MXBean
    requires org.slf4j;
    requires org.agrona;
    requires com.sun.jna; // the CUDA binding (package cuda), loaded on the first device call
    requires static com.microsoft.onnxruntime; // the ONNX Runtime adapter, for those who add ORT
    requires static micrometer.core; // the Micrometer binder, for those who add Micrometer
    requires static io.netty.common; // the cross-node path (TCP through Netty), for those who set MSTAR_REMOTE_*
    requires static io.netty.buffer;
    requires static io.netty.transport;
    requires static io.netty.handler; // its optional TLS
    requires static io.netty.transport.classes.epoll; // the native epoll transport where it loads, NIO otherwise
    exports io.mstar.transport;
    exports io.mstar.transport.exceptions;
    exports io.mstar.transport.codec;
    exports io.mstar.transport.liveness;
    exports io.mstar.transport.staging;
    exports io.mstar.transport.jmx;
    exports io.mstar.transport.onnx;
    exports io.mstar.transport.micrometer;
    uses io.mstar.transport.TensorTransports.Assembly; // the API finds its implementation without naming it
    provides io.mstar.transport.TensorTransports.Assembly with io.mstar.transport.endpoint.DefaultAssembly;
}
