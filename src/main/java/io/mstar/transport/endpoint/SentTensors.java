package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;
import io.mstar.transport.acks.UuidTable;

import java.util.List;

/**
 * The tensors an endpoint sent whose outcome someone waits for: uuid to request id, delivery handle,
 * consumer (or a fan-out's consumers, and which of them failed) and, once known, a failure that decides the
 * outcome when the tensor is freed; columns of a
 * {@link UuidTable}, so that tracking and resolving allocate nothing. Not thread-safe: {@link Outcomes}
 * guards it.
 */
final class SentTensors extends UuidTable {
    private static final int INITIAL_CAPACITY = 256;

    private String[] requestIds = new String[INITIAL_CAPACITY];
    private DeliveryHandle[] deliveries = new DeliveryHandle[INITIAL_CAPACITY];
    private String[] consumers = new String[INITIAL_CAPACITY];
    private Delivery.Failure[] failures = new Delivery.Failure[INITIAL_CAPACITY];
    private String[] details = new String[INITIAL_CAPACITY];
    private Object[] fanOuts = new Object[INITIAL_CAPACITY]; // a fan-out's List<String> of consumers, else null
    private long[] sharesFailed = new long[INITIAL_CAPACITY]; // a bit per fan-out consumer that will never have it
    // What the last successful remove() took out.
    String removedRequestId;
    DeliveryHandle removedDelivery;
    String removedConsumer;
    Delivery.Failure removedFailure;
    String removedDetail;
    /** Whether the removed tensor was a fan-out's that some of its consumers failed and the others did not. */
    boolean removedPartly;

    SentTensors() {
        super(INITIAL_CAPACITY);
    }

    /** @param fanOut a fan-out's consumers (entities), or null for a tensor sent to {@code consumer} alone */
    void track(long msb, long lsb, String requestId, DeliveryHandle delivery, String consumer, List<String> fanOut) {
        int i = add(msb, lsb);
        requestIds[i] = requestId;
        deliveries[i] = delivery;
        consumers[i] = consumer;
        failures[i] = null;
        details[i] = null;
        fanOuts[i] = fanOut;
        sharesFailed[i] = 0;
    }

    /**
     * Records why the tensor will not count as delivered, unless a reason is known already; {@code entity}: the
     * one consumer of a fan-out's that will never have it, or null when none of them will (the endpoint closed).
     */
    void fail(long msb, long lsb, Delivery.Failure failure, String detail, String entity) {
        int i = find(msb, lsb);
        if (i < 0) {
            return;
        }
        if (failures[i] == null) {
            failures[i] = failure;
            details[i] = detail;
        }
        if (fanOuts[i] instanceof List<?> fanOut) {
            int share = entity == null ? -1 : fanOut.indexOf(entity);
            sharesFailed[i] |= share < 0 ? -1L : 1L << share;
        }
    }

    boolean contains(long msb, long lsb) {
        return find(msb, lsb) >= 0;
    }

    /** Removes the tensor; its fields are then in the {@code removed*} fields. */
    boolean remove(long msb, long lsb) {
        int i = find(msb, lsb);
        if (i < 0) {
            return false;
        }
        removedRequestId = requestIds[i];
        removedDelivery = deliveries[i];
        removedConsumer = consumers[i];
        removedFailure = failures[i];
        removedDetail = details[i];
        removedPartly = fanOuts[i] instanceof List<?> fanOut && sharesFailed[i] != -1L
            && Long.bitCount(sharesFailed[i]) < fanOut.size();
        removeAt(i);
        return true;
    }

    /** The uuid halves of every tracked tensor, two longs each. */
    long[] uuids() {
        long[] out = new long[2 * size()];
        int k = 0;
        for (int i = 0; i < capacity(); i++) {
            if (used(i)) {
                out[k++] = msb(i);
                out[k++] = lsb(i);
            }
        }
        return out;
    }

    @Override
    protected void moved(int from, int to) {
        requestIds[to] = requestIds[from];
        deliveries[to] = deliveries[from];
        consumers[to] = consumers[from];
        failures[to] = failures[from];
        details[to] = details[from];
        fanOuts[to] = fanOuts[from];
        sharesFailed[to] = sharesFailed[from];
    }

    @Override
    protected void cleared(int i) {
        requestIds[i] = null;
        deliveries[i] = null;
        consumers[i] = null;
        failures[i] = null;
        details[i] = null;
        fanOuts[i] = null;
    }

    @Override
    protected void regrown(int capacity, int[] from) {
        String[] oldRequestIds = requestIds;
        DeliveryHandle[] oldDeliveries = deliveries;
        String[] oldConsumers = consumers;
        Delivery.Failure[] oldFailures = failures;
        String[] oldDetails = details;
        Object[] oldFanOuts = fanOuts;
        long[] oldSharesFailed = sharesFailed;
        requestIds = new String[capacity];
        deliveries = new DeliveryHandle[capacity];
        consumers = new String[capacity];
        failures = new Delivery.Failure[capacity];
        details = new String[capacity];
        fanOuts = new Object[capacity];
        sharesFailed = new long[capacity];
        for (int j = 0; j < capacity; j++) {
            int k = from[j];
            if (k >= 0) {
                requestIds[j] = oldRequestIds[k];
                deliveries[j] = oldDeliveries[k];
                consumers[j] = oldConsumers[k];
                failures[j] = oldFailures[k];
                details[j] = oldDetails[k];
                fanOuts[j] = oldFanOuts[k];
                sharesFailed[j] = oldSharesFailed[k];
            }
        }
    }
}
