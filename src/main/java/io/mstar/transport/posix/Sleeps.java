package io.mstar.transport.posix;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * How a thread sleeps and is woken, through the FFM {@link Linker} as {@link Posix}' calls are: a futex on a word
 * of a shared mapping (a sleeper in one process, its waker in another), the thread's timer slack, and whether a
 * wake lets it preempt the thread running on its core.
 */
public final class Sleeps {
    private Sleeps() {
    }

    // syscall(SYS_futex, uaddr, op, val, timeout, uaddr2, val3): glibc has no futex() wrapper.
    private static final MethodHandle SYSCALL_FUTEX = Posix.errnoCall("syscall",
        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT),
        Linker.Option.firstVariadicArg(1));
    private static final MethodHandle PRCTL = Posix.plainCall("prctl",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG), Linker.Option.firstVariadicArg(1));
    private static final int PR_SET_TIMERSLACK = 29;
    private static final MethodHandle SCHED_SETSCHEDULER = Posix.plainCall("sched_setscheduler",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    /** The kernel's policy for a thread that a wake does not let preempt the running one ({@code sched.h}). */
    public static final int SCHED_BATCH = 3;
    private static final long SYS_FUTEX = Posix.AARCH64 ? 98 : 202;
    private static final int FUTEX_WAIT = 0;
    private static final int FUTEX_WAKE = 1;
    private static final long TIMESPEC_SIZE = 16;
    // Each thread's struct timespec and call state for the futex calls: a wait or a wake allocates nothing.
    private record FutexScratch(MemorySegment timeout, MemorySegment state) {
    }

    private static final ThreadLocal<FutexScratch> FUTEX_SCRATCH = ThreadLocal.withInitial(() -> {
        Arena arena = Arena.ofAuto();
        return new FutexScratch(arena.allocate(TIMESPEC_SIZE, 8), arena.allocate(Posix.CALL_STATE));
    });

    /**
     * Sleeps while the 32-bit word at {@code address} (in a shared mapping: other processes wake it) holds
     * {@code expected}, for at most {@code timeoutNs}: {@code futex(FUTEX_WAIT)}. Returns early, without saying
     * why, when the word differs already, when woken, on a signal or at the timeout; the caller checks again.
     */
    public static void futexWait(long address, int expected, long timeoutNs) {
        FutexScratch scratch = FUTEX_SCRATCH.get();
        MemorySegment timeout = scratch.timeout();
        MemorySegment state = scratch.state();
        timeout.set(JAVA_LONG, 0, timeoutNs / 1_000_000_000L);
        timeout.set(JAVA_LONG, 8, timeoutNs % 1_000_000_000L);
        try {
            long r = (long) SYSCALL_FUTEX.invokeExact(state, SYS_FUTEX, address, FUTEX_WAIT, expected, timeout, 0L, 0);
            int errno = r == 0 ? 0 : Posix.errno(state);
            if (r != 0 && errno != Posix.EWOULDBLOCK && errno != Posix.ETIMEDOUT && errno != Posix.EINTR) {
                throw Posix.failure("futex(FUTEX_WAIT)", errno, "0x" + Long.toHexString(address));
            }
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }

    /** Wakes every thread of any process that sleeps on the word at {@code address}: {@code futex(FUTEX_WAKE)}. */
    public static void futexWake(long address) {
        MemorySegment state = FUTEX_SCRATCH.get().state();
        try {
            long r = (long) SYSCALL_FUTEX.invokeExact(state, SYS_FUTEX, address, FUTEX_WAKE, Integer.MAX_VALUE,
                MemorySegment.NULL, 0L, 0);
            if (r < 0) {
                throw Posix.failure("futex(FUTEX_WAKE)", state, "0x" + Long.toHexString(address));
            }
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }

    /**
     * Sets the calling thread's timer slack ({@code prctl(PR_SET_TIMERSLACK)}): how late the kernel may end its
     * timed sleeps to batch wake-ups, 50 us by default. Returns false where the kernel refuses.
     */
    public static boolean setTimerSlackNs(long slackNs) {
        try {
            return (int) PRCTL.invokeExact(PR_SET_TIMERSLACK, slackNs) == 0;
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }

    /**
     * Lets the calling thread, when woken, wait for a core instead of taking one from the thread running there:
     * {@code sched_setscheduler(0, SCHED_BATCH)}, which the kernel's wake-up preemption skips. It keeps its full
     * share of the CPU (the weight of nice 0) and runs at once on an idle core; on a busy one it runs when the
     * running thread blocks, yields or ends its slice. Returns false where the kernel refuses.
     */
    public static boolean wakeWithoutPreempting() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment param = arena.allocate(JAVA_INT); // struct sched_param: a priority of 0, the only one allowed
            return (int) SCHED_SETSCHEDULER.invokeExact(0, SCHED_BATCH, param) == 0;
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }
}
