package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;
import io.mstar.transport.DeliveryListener;

/**
 * Outcomes waiting for the thread that polls them ({@link DeliveryListener#toldWhenPolled()}), in the order
 * they were learned: parallel arrays used as a ring, grown when full, so that queuing one allocates nothing
 * in steady state. Thread-safe: any thread adds, the polling thread takes.
 */
final class OutcomeQueue {
    private long[] msbs = new long[256];
    private long[] lsbs = new long[256];
    private String[] requestIds = new String[256];
    private Delivery.Failure[] failures = new Delivery.Failure[256];
    private String[] details = new String[256];
    private long head; // guarded by this: next to take
    private long tail; // guarded by this: next to fill

    synchronized void add(String requestId, long msb, long lsb, Delivery.Failure failure, String detail) {
        if (tail - head == msbs.length) {
            grow();
        }
        int i = (int) (tail++ & (msbs.length - 1));
        msbs[i] = msb;
        lsbs[i] = lsb;
        requestIds[i] = requestId;
        failures[i] = failure;
        details[i] = detail;
    }

    /** Tells {@code listener} up to {@code limit} outcomes, oldest first, outside the lock; returns how many. */
    int drain(DeliveryListener listener, int limit) {
        int told = 0;
        while (told < limit) {
            String requestId;
            long msb;
            long lsb;
            Delivery.Failure failure;
            String detail;
            synchronized (this) {
                if (head == tail) {
                    break;
                }
                int i = (int) (head++ & (msbs.length - 1));
                requestId = requestIds[i];
                msb = msbs[i];
                lsb = lsbs[i];
                failure = failures[i];
                detail = details[i];
                requestIds[i] = null;
                details[i] = null;
            }
            told++;
            if (failure == null) {
                listener.delivered(requestId, msb, lsb);
            } else {
                listener.failed(requestId, msb, lsb, failure, detail);
            }
        }
        return told;
    }

    // Doubles the ring, keeping the order.
    private void grow() {
        int n = msbs.length;
        long[] m = new long[2 * n];
        long[] l = new long[2 * n];
        String[] r = new String[2 * n];
        Delivery.Failure[] f = new Delivery.Failure[2 * n];
        String[] d = new String[2 * n];
        for (int k = 0; k < n; k++) {
            int i = (int) ((head + k) & (n - 1));
            m[k] = msbs[i];
            l[k] = lsbs[i];
            r[k] = requestIds[i];
            f[k] = failures[i];
            d[k] = details[i];
        }
        msbs = m;
        lsbs = l;
        requestIds = r;
        failures = f;
        details = d;
        tail = n;
        head = 0;
    }
}
