package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;

/**
 * The tensors an endpoint sent whose outcome someone waits for: uuid to request id, delivery handle,
 * consumer and, once known, a failure that decides the outcome when the tensor is freed. Open addressing
 * with linear probing and backward-shift deletion in parallel arrays, so tracking and resolving allocate
 * nothing; the arrays double when half full. Not thread-safe: the endpoint guards it.
 */
final class SentTensors {
    private long[] msbs;
    private long[] lsbs;
    private boolean[] used;
    private String[] requestIds;
    private DeliveryHandle[] deliveries;
    private String[] consumers;
    private Delivery.Failure[] failures;
    private String[] details;
    private int mask;
    private int size;
    // What the last successful remove() took out.
    String removedRequestId;
    DeliveryHandle removedDelivery;
    String removedConsumer;
    Delivery.Failure removedFailure;
    String removedDetail;

    SentTensors() {
        allocate(256);
    }

    int size() {
        return size;
    }

    void track(long msb, long lsb, String requestId, DeliveryHandle delivery, String consumer) {
        if ((size + 1) * 2 > used.length) {
            rehash(used.length * 2);
        }
        int i = home(msb, lsb);
        while (used[i] && !(msbs[i] == msb && lsbs[i] == lsb)) {
            i = (i + 1) & mask;
        }
        if (!used[i]) {
            size++;
        }
        used[i] = true;
        msbs[i] = msb;
        lsbs[i] = lsb;
        requestIds[i] = requestId;
        deliveries[i] = delivery;
        consumers[i] = consumer;
        failures[i] = null;
        details[i] = null;
    }

    /** Records why the tensor will not count as delivered, unless a reason is known already. */
    void fail(long msb, long lsb, Delivery.Failure failure, String detail) {
        int i = find(msb, lsb);
        if (i >= 0 && failures[i] == null) {
            failures[i] = failure;
            details[i] = detail;
        }
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
        int hole = i;
        int j = i;
        while (true) { // backward shift: move later entries of the probe run into the hole
            j = (j + 1) & mask;
            if (!used[j]) {
                break;
            }
            int home = home(msbs[j], lsbs[j]);
            if (((j - home) & mask) >= ((j - hole) & mask)) {
                move(j, hole);
                hole = j;
            }
        }
        clear(hole);
        size--;
        return true;
    }

    /** The uuid halves of every tracked tensor, two longs each. */
    long[] uuids() {
        long[] out = new long[2 * size];
        int k = 0;
        for (int i = 0; i < used.length; i++) {
            if (used[i]) {
                out[k++] = msbs[i];
                out[k++] = lsbs[i];
            }
        }
        return out;
    }

    private int find(long msb, long lsb) {
        int i = home(msb, lsb);
        while (used[i]) {
            if (msbs[i] == msb && lsbs[i] == lsb) {
                return i;
            }
            i = (i + 1) & mask;
        }
        return -1;
    }

    private int home(long msb, long lsb) {
        long h = (msb ^ lsb) * 0x9E3779B97F4A7C15L; // uuids are random already: spread them over the mask
        return (int) (h >>> 32) & mask;
    }

    private void move(int from, int to) {
        used[to] = true;
        msbs[to] = msbs[from];
        lsbs[to] = lsbs[from];
        requestIds[to] = requestIds[from];
        deliveries[to] = deliveries[from];
        consumers[to] = consumers[from];
        failures[to] = failures[from];
        details[to] = details[from];
    }

    private void clear(int i) {
        used[i] = false;
        requestIds[i] = null;
        deliveries[i] = null;
        consumers[i] = null;
        failures[i] = null;
        details[i] = null;
    }

    private void allocate(int capacity) {
        msbs = new long[capacity];
        lsbs = new long[capacity];
        used = new boolean[capacity];
        requestIds = new String[capacity];
        deliveries = new DeliveryHandle[capacity];
        consumers = new String[capacity];
        failures = new Delivery.Failure[capacity];
        details = new String[capacity];
        mask = capacity - 1;
        size = 0;
    }

    private void rehash(int capacity) {
        long[] oldMsbs = msbs;
        long[] oldLsbs = lsbs;
        boolean[] oldUsed = used;
        String[] oldRequestIds = requestIds;
        DeliveryHandle[] oldDeliveries = deliveries;
        String[] oldConsumers = consumers;
        Delivery.Failure[] oldFailures = failures;
        String[] oldDetails = details;
        allocate(capacity);
        for (int i = 0; i < oldUsed.length; i++) {
            if (oldUsed[i]) {
                track(oldMsbs[i], oldLsbs[i], oldRequestIds[i], oldDeliveries[i], oldConsumers[i]);
                if (oldFailures[i] != null) {
                    fail(oldMsbs[i], oldLsbs[i], oldFailures[i], oldDetails[i]);
                }
            }
        }
    }
}
