package io.mstar.transport.endpoint;

import io.mstar.transport.posix.Sleeps;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.IntSupplier;

/**
 * An endpoint's ACK thread, started with its first send: it reads the mailbox when the application does not
 * ({@code ackThreadRound}), so frees and outcomes never wait on the application's polling. With nothing to read
 * it sleeps on the mailbox ({@link MessageWait}) until a consumer's ACK wakes it: idle, it costs nothing; while
 * the application reads the mailbox itself, it looks again only every {@value MailboxReading#IDLE_READ_NS} ns.
 *
 * <p>Woken while every core is busy (the sender posting, the consumer handling), it waits for a core instead of
 * taking the consumer's ({@link Sleeps#wakeWithoutPreempting}): the sender reads its own ACKs after each post
 * meanwhile, and a consumer that lost its core to each wake fell behind, filled the sender's window and made it
 * wait for this thread (measured 1.2x to 1.3x at 4 KiB, 1.5x beside a busy process: docs/benchmarks.md). A sender
 * blocked on its window leaves its core idle, and this thread runs there at once.
 */
final class AckThread {
    private static final Logger LOG = LoggerFactory.getLogger(AckThread.class);
    /** The longest sleep between two looks at an idle mailbox. */
    static final long IDLE_SLEEP_NS = 1_000_000_000L;
    /** How long it waits for another thread that reads the mailbox for a moment (a sender after its post). */
    static final long BUSY_PARK_NS = 20_000;

    /** What a round returns when the application reads the mailbox now: the ACK thread stands aside. */
    static final int APPLICATION_READS = -1;
    /** What a round returns when another thread holds the mailbox for a moment. */
    static final int BUSY = -2;

    private final Thread thread;
    private final MessageWait wait;
    private volatile boolean stopped;
    private final BooleanSupplier wakeUp; // made once: a wait allocates nothing

    /**
     * @param round   tells what waits and reads; returns the messages read, {@link #APPLICATION_READS} or
     *                {@link #BUSY}
     * @param toTell  whether outcomes wait for this thread to tell them (another thread told its share and left)
     */
    AckThread(String entity, IntSupplier round, MessageWait wait, BooleanSupplier toTell) {
        this.wait = wait;
        this.wakeUp = () -> stopped || toTell.getAsBoolean();
        this.thread = Thread.ofPlatform().daemon().name("mstar-acks-" + entity).start(() -> run(round, wait));
    }

    private void run(IntSupplier round, MessageWait wait) {
        Sleeps.setTimerSlackNs(1_000); // its short parks end on time, not 50 us late
        if (!Sleeps.wakeWithoutPreempting()) {
            LOG.debug("the ACK thread runs with the default policy: the kernel refused SCHED_BATCH");
        }
        while (!stopped) {
            int read;
            try {
                read = round.getAsInt();
            } catch (IllegalStateException e) {
                LOG.debug("the ACK thread stops, the mailbox is closed: {}", e.getMessage()); // by close() or at exit
                return;
            } catch (RuntimeException | Error e) { // an Error of a listener's must not end the ACKs for good
                LOG.warn("the ACK thread could not read the mailbox", e);
                read = 0;
                LockSupport.parkNanos(BUSY_PARK_NS);
            }
            if (read == APPLICATION_READS) {
                LockSupport.parkNanos(MailboxReading.IDLE_READ_NS);
            } else if (read == BUSY) {
                LockSupport.parkNanos(BUSY_PARK_NS);
            } else if (read == 0) {
                wait.awaitMessage(IDLE_SLEEP_NS, wakeUp, false); // no yields: measured faster quiet (4 KiB 1.18 vs 1.03 GB/s)
            }
        }
    }

    /** Stops the thread and waits for it, at most a second. */
    void stop() {
        stopped = true;
        if (Thread.currentThread() == thread) {
            return; // closed by a listener it tells: it ends once that returns
        }
        thread.interrupt();
        wait.wake();
        try {
            thread.join(1000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
