package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;

/**
 * Outcomes waiting to be told, in the order they were learned: for the thread that polls them
 * ({@link io.mstar.transport.DeliveryListener#toldWhenPolled()}), or for the ACK thread once it let go of the
 * reading lock. Parallel arrays used as a ring, grown when full, so that queuing one allocates nothing in
 * steady state. Thread-safe: any thread adds, one thread takes.
 */
final class OutcomeQueue {
    private long[] msbs = new long[256];
    private long[] lsbs = new long[256];
    private String[] requestIds = new String[256];
    private DeliveryHandle[] deliveries = new DeliveryHandle[256];
    private Delivery.Failure[] failures = new Delivery.Failure[256];
    private String[] details = new String[256];
    private long head; // guarded by this: next to take
    private long tail; // guarded by this: next to fill

    /** Who is told what the queue held, in order. */
    interface Teller {
        void tell(String requestId, long msb, long lsb, DeliveryHandle delivery, Delivery.Failure failure,
                  String detail);
    }

    synchronized void add(String requestId, long msb, long lsb, DeliveryHandle delivery, Delivery.Failure failure,
                          String detail) {
        if (tail - head == msbs.length) {
            grow();
        }
        int i = (int) (tail++ & (msbs.length - 1));
        msbs[i] = msb;
        lsbs[i] = lsb;
        requestIds[i] = requestId;
        deliveries[i] = delivery;
        failures[i] = failure;
        details[i] = detail;
    }

    /** Tells {@code teller} up to {@code limit} outcomes, oldest first, outside the lock; returns how many. */
    int drain(Teller teller, int limit) {
        int told = 0;
        while (told < limit) {
            String requestId;
            DeliveryHandle delivery;
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
                delivery = deliveries[i];
                msb = msbs[i];
                lsb = lsbs[i];
                failure = failures[i];
                detail = details[i];
                requestIds[i] = null;
                deliveries[i] = null;
                details[i] = null;
            }
            told++;
            teller.tell(requestId, msb, lsb, delivery, failure, detail);
        }
        return told;
    }

    // Doubles the ring, keeping the order.
    private void grow() {
        int n = msbs.length;
        long[] m = new long[2 * n];
        long[] l = new long[2 * n];
        String[] r = new String[2 * n];
        DeliveryHandle[] h = new DeliveryHandle[2 * n];
        Delivery.Failure[] f = new Delivery.Failure[2 * n];
        String[] d = new String[2 * n];
        for (int k = 0; k < n; k++) {
            int i = (int) ((head + k) & (n - 1));
            m[k] = msbs[i];
            l[k] = lsbs[i];
            r[k] = requestIds[i];
            h[k] = deliveries[i];
            f[k] = failures[i];
            d[k] = details[i];
        }
        msbs = m;
        lsbs = l;
        requestIds = r;
        deliveries = h;
        failures = f;
        details = d;
        tail = n;
        head = 0;
    }
}
