package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;

/**
 * Outcomes decided and not yet told to the listener, in the order they were decided ({@link Outcomes}).
 * Parallel arrays used as a ring, grown when full, so that queuing one allocates nothing in steady state.
 * Thread-safe: any thread adds; any thread takes, and each outcome is taken once.
 */
final class OutcomeQueue {
    /**
     * Test-only seam: {@code -Dmstar.test.outcomeTakeNotAtomic=true} looks at the head, tells it, and only then
     * moves the head on, as a queue whose take is not one step would: two threads telling at once may tell one
     * outcome twice and skip the next, so the API-usage campaign can show it catches a misnamed outcome.
     */
    static final boolean TAKE_NOT_ATOMIC = Boolean.getBoolean("mstar.test.outcomeTakeNotAtomic");
    private long[] msbs = new long[256];
    private long[] lsbs = new long[256];
    private String[] requestIds = new String[256];
    private Delivery.Failure[] failures = new Delivery.Failure[256];
    private String[] details = new String[256];
    private long head; // guarded by this: next to take
    private long tail; // guarded by this: next to fill

    /** Who is told what the queue held. */
    interface Teller {
        void tell(String requestId, long msb, long lsb, Delivery.Failure failure, String detail);
    }

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

    synchronized int size() {
        return (int) (tail - head);
    }

    /** Takes up to {@code limit} outcomes, oldest first, each told to {@code teller} outside the lock; returns how many. */
    int drain(Teller teller, int limit) {
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
                int i = (int) ((TAKE_NOT_ATOMIC ? head : head++) & (msbs.length - 1));
                requestId = requestIds[i];
                msb = msbs[i];
                lsb = lsbs[i];
                failure = failures[i];
                detail = details[i];
                if (!TAKE_NOT_ATOMIC) {
                    requestIds[i] = null;
                    details[i] = null;
                }
            }
            told++;
            teller.tell(requestId, msb, lsb, failure, detail);
            if (TAKE_NOT_ATOMIC) {
                synchronized (this) {
                    if (head != tail) {
                        head++;
                    }
                }
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
