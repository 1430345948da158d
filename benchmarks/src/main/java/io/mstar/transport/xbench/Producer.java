package io.mstar.transport.xbench;

import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * The producer's loop, the same for every peer: per size, warm up, then send for the measured time with at
 * most {@link Protocol#window} payloads unACKed, recording each payload's send-to-ACK time; prints one
 * {@code ROW} line per size. ACKs arrive in order, so the n-th ACK is payload n's.
 */
abstract class Producer {
    private static final int MAX_SAMPLES = 1 << 22;

    private final long[] sentAt = new long[1 << 16];
    private final long[] samples = new long[MAX_SAMPLES];
    private volatile Semaphore permits;
    private volatile long measureFrom = Long.MAX_VALUE;
    private volatile long measureTo = Long.MAX_VALUE;
    private long acked;     // written by the ACK thread only
    private int sampleCount;
    private final IdleStrategy waiting = new BackoffIdleStrategy(100, 10, 1_000, 100_000);

    /** Fills payload {@code seq} of {@code size} bytes and sends it. */
    abstract void send(long seq, long size) throws Exception;

    /** Tells the consumer that this size is over (so that it does not wait for more). */
    void endOfSize(long size) throws Exception {
    }

    /**
     * Takes the outcomes waiting on this thread (a peer whose ACKs the producer reads in its own duty cycle, as
     * Aeron's users poll theirs); called after each send and while the producer waits for room. Nothing by
     * default: the peer's ACK thread calls {@link #acked()}.
     */
    void takeOutcomes() {
    }

    /** Whether {@link #takeOutcomes()} is how ACKs arrive: then the producer polls for room instead of blocking. */
    boolean pollsItsOutcomes() {
        return false;
    }

    /** Called by the peer's ACK thread (or in {@link #takeOutcomes()}) for each ACK, in order. */
    final void acked() {
        long seq = acked++;
        if (seq >= measureFrom && seq < measureTo && sampleCount < MAX_SAMPLES) {
            samples[sampleCount++] = System.nanoTime() - sentAt[(int) (seq & (sentAt.length - 1))];
        }
        permits.release();
    }

    final void run(double seconds) throws Exception {
        for (long size : Protocol.SIZES) {
            int window = Protocol.window(size);
            synchronized (this) {
                acked = 0;
                sampleCount = 0;
                measureFrom = Long.MAX_VALUE;
                measureTo = Long.MAX_VALUE;
                permits = new Semaphore(window);
            }
            long seq = 0;
            long warmUntil = System.nanoTime() + (long) (Protocol.warmUpSeconds(seconds) * 1e9);
            while (System.nanoTime() < warmUntil) {
                seq = sendOne(seq, size);
            }
            measureFrom = seq;
            long[] costFrom = Cost.snapshot();
            long start = System.nanoTime();
            long end = start + (long) (seconds * 1e9);
            Curve curve = new Curve(start, seconds);
            long now;
            while ((now = System.nanoTime()) < end) {
                curve.at(now, seq - measureFrom);
                seq = sendOne(seq, size);
            }
            measureTo = seq;
            long elapsed = System.nanoTime() - start;
            String cost = Cost.line("producer", size, costFrom, measureTo - measureFrom);
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (!permits.tryAcquire(window, 1, TimeUnit.MILLISECONDS)) {
                takeOutcomes();
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("ACKs stopped: size=" + size + ", sent=" + seq + ", acked=" + acked);
                }
            }
            endOfSize(size);
            long payloads = measureTo - measureFrom;
            long[] sorted;
            synchronized (this) {
                sorted = Arrays.copyOf(samples, sampleCount);
            }
            Arrays.sort(sorted);
            System.out.printf(Locale.ROOT, "ROW %d %.1f %.4f %.2f %.2f %.2f%n", size, payloads / (elapsed / 1e9),
                payloads * size / (elapsed / 1e9) / 1e9, percentile(sorted, 0.50) / 1e3, percentile(sorted, 0.99) / 1e3,
                percentile(sorted, 0.999) / 1e3);
            System.out.println(cost);
            if (curve.line(size) != null) {
                System.out.println(curve.line(size));
            }
        }
        System.out.println(Cost.jitLine("producer"));
    }

    private long sendOne(long seq, long size) throws Exception {
        if (pollsItsOutcomes()) { // the duty cycle: poll, and back off as Agrona's idle strategies do
            waiting.reset();
            while (!permits.tryAcquire()) {
                takeOutcomes();
                waiting.idle();
            }
        } else {
            permits.acquire();
        }
        sentAt[(int) (seq & (sentAt.length - 1))] = System.nanoTime();
        send(seq, size);
        takeOutcomes();
        return seq + 1;
    }

    private static double percentile(long[] sorted, double p) {
        return sorted.length == 0 ? Double.NaN : sorted[(int) Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    }
}
