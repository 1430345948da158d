package io.mstar.transport.endpoint;

import io.mstar.transport.Delivery;

/**
 * Outcomes decided and not yet told to the listener, in the order they were decided ({@link Outcomes}), and the
 * one thread that tells them now. Parallel arrays used as a ring, grown when full, so that queuing one allocates
 * nothing in steady state.
 *
 * <p>Telling is serialized and iterative, as a serializing executor runs callbacks: one thread at a time tells,
 * oldest first, in a loop. A thread that finds another telling (or finds itself telling: a listener that posts,
 * polls or closes) leaves what it decided to that loop and returns at once, so the listener is never entered twice
 * at once, never re-entered, and told in the order outcomes were decided; the teller lets go only after it saw the
 * queue empty under the queue's lock, so nothing added meanwhile waits untold. Thread-safe.
 */
final class OutcomeQueue {
    /**
     * Test-only seam: {@code -Dmstar.test.outcomeTakeNotAtomic=true} looks at the head, tells it, and only then
     * moves the head on, as a queue whose take is not one step would; with {@link #CONCURRENT_TELLERS} two threads
     * telling at once may then tell one outcome twice and skip the next, so the API-usage campaign can show it
     * catches a misnamed outcome.
     */
    static final boolean TAKE_NOT_ATOMIC = Boolean.getBoolean("mstar.test.outcomeTakeNotAtomic");
    /**
     * Test-only seam: {@code -Dmstar.test.concurrentTellers=true} brings back the telling this class replaced: every
     * thread that decided tells what it takes, at once and re-entrantly (a listener that posts tells one level
     * deeper), so the campaign's and the model checker's negative controls can show they catch it.
     */
    static final boolean CONCURRENT_TELLERS = Boolean.getBoolean("mstar.test.concurrentTellers")
        || TAKE_NOT_ATOMIC;

    private final boolean oneTeller;
    private long[] msbs = new long[256];
    private long[] lsbs = new long[256];
    private String[] requestIds = new String[256];
    private Delivery.Failure[] failures = new Delivery.Failure[256];
    private String[] details = new String[256];
    private long head; // guarded by this: next to take
    private long tail; // guarded by this: next to fill
    private volatile Thread teller; // written under this: the thread in the telling loop, or null
    private volatile long tellerSince; // when the teller entered its loop
    private volatile boolean closing; // the endpoint closed: a loop tells all, whatever its limit

    /** Who is told what the queue held. */
    interface Teller {
        void tell(String requestId, long msb, long lsb, Delivery.Failure failure, String detail);
    }

    OutcomeQueue() {
        this(!CONCURRENT_TELLERS);
    }

    /** @param oneTeller false only in tests: the concurrent, re-entrant telling this class replaced */
    OutcomeQueue(boolean oneTeller) {
        this.oneTeller = oneTeller;
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

    /** The endpoint closed: from now on a telling loop ignores its limit, so the CLOSED outcomes are all told. */
    void closing() {
        closing = true;
    }

    /** Whether the calling thread is telling now: it runs in the listener. */
    boolean tellingOnThisThread() {
        return teller == Thread.currentThread();
    }

    /** Whether a thread tells now. */
    boolean anyTeller() {
        return teller != null;
    }

    /** The thread telling now and for how long, for the stall's WARN; null when none tells. */
    String tellerNow() {
        Thread t = teller;
        long since = tellerSince;
        return t == null ? null : "thread " + t.getName() + " has been telling outcomes to the DeliveryListener for "
            + (System.nanoTime() - since) / 1_000_000 + " ms";
    }

    /**
     * Tells up to {@code limit} outcomes, oldest first, each outside the lock, unless another thread (or this one,
     * further up its stack) tells now: then returns 0 at once and that loop tells them. Returns how many it told.
     */
    int drain(Teller to, int limit) {
        Thread me = Thread.currentThread();
        synchronized (this) {
            if (head == tail || (oneTeller && teller != null)) {
                return 0;
            }
            if (oneTeller) {
                teller = me;
                tellerSince = System.nanoTime();
            }
        }
        int told = 0;
        try {
            while (true) {
                String requestId;
                long msb;
                long lsb;
                Delivery.Failure failure;
                String detail;
                synchronized (this) {
                    if (head == tail || (told >= limit && !closing)) {
                        if (oneTeller) {
                            teller = null; // under the lock that add() takes: whoever adds next tells it
                        }
                        return told;
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
                to.tell(requestId, msb, lsb, failure, detail);
                if (TAKE_NOT_ATOMIC) {
                    synchronized (this) {
                        if (head != tail) {
                            head++;
                        }
                    }
                }
            }
        } finally {
            if (oneTeller && teller == me) {
                synchronized (this) {
                    teller = null; // the teller threw past its catch (an Error): the next drain tells the rest
                }
            }
        }
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
