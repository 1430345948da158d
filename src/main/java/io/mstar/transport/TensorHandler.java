package io.mstar.transport;

/**
 * Handles one received tensor, in place, during {@link TensorEndpoint#poll} or {@link TensorEndpoint#receive}:
 * the endpoint ACKs it when the handler returns (or throws), unless the handler {@linkplain
 * IncomingTensor#keep() keeps} it.
 */
@FunctionalInterface
public interface TensorHandler {
    void onTensor(IncomingTensor tensor);
}
