package io.mstar.transport.posix;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * Open-file-description locks on byte ranges ({@code fcntl F_OFD_*}), through the FFM {@link Linker} as
 * {@link Posix}' calls are: like {@code flock}, a lock belongs to the open file and the kernel drops it when the
 * file is closed or its process dies; unlike {@code flock}, it locks a byte range, so one file carries many
 * independent locks (a mailbox's writer slots, a node budget's slots).
 */
public final class RangeLocks {
    private RangeLocks() {
    }

    private static final MethodHandle FCNTL = Posix.errnoCall("fcntl",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS), Linker.Option.firstVariadicArg(2));
    private static final int F_OFD_GETLK = 36;
    private static final int F_OFD_SETLK = 37;
    private static final short F_WRLCK = 1;
    private static final short F_UNLCK = 2;
    // struct flock on x86-64 and aarch64 Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid.
    private static final long FLOCK_SIZE = 32;
    private static final long FLOCK_START_OFFSET = 8;
    private static final long FLOCK_LEN_OFFSET = 16;

    /**
     * An open-file-description write lock on bytes {@code [offset, offset + length)} of {@code fd}'s file
     * ({@code fcntl F_OFD_SETLK}), without waiting: true when taken. Like {@code flock}, it belongs to the
     * open file and the kernel drops it when the file is closed or its process dies; unlike {@code flock},
     * it locks a byte range, so one file can carry many independent locks. {@code fd} must be writable.
     */
    public static boolean tryLock(int fd, long offset, long length, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Posix.CALL_STATE);
            if ((int) FCNTL.invokeExact(state, fd, F_OFD_SETLK, rangeLock(arena, offset, length, F_WRLCK)) != 0) {
                int errno = Posix.errno(state);
                if (errno == Posix.EWOULDBLOCK || errno == Posix.EACCES) {
                    return false;
                }
                throw Posix.failure("fcntl(F_OFD_SETLK)", errno, path);
            }
            return true;
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }

    /** Whether another open file holds a lock on any of bytes {@code [offset, offset + length)} ({@code F_OFD_GETLK}). */
    public static boolean lockedByOther(int fd, long offset, long length, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Posix.CALL_STATE);
            MemorySegment lock = rangeLock(arena, offset, length, F_WRLCK);
            if ((int) FCNTL.invokeExact(state, fd, F_OFD_GETLK, lock) != 0) {
                throw Posix.failure("fcntl(F_OFD_GETLK)", state, path);
            }
            return lock.get(JAVA_SHORT, 0) != F_UNLCK;
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }

    /** Drops this open file's lock on bytes {@code [offset, offset + length)}. */
    public static void unlock(int fd, long offset, long length, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Posix.CALL_STATE);
            if ((int) FCNTL.invokeExact(state, fd, F_OFD_SETLK, rangeLock(arena, offset, length, F_UNLCK)) != 0) {
                throw Posix.failure("fcntl(F_OFD_SETLK, F_UNLCK)", state, path);
            }
        } catch (Throwable t) {
            throw Posix.rethrow(t);
        }
    }

    private static MemorySegment rangeLock(Arena arena, long offset, long length, short type) {
        MemorySegment lock = arena.allocate(FLOCK_SIZE, 8); // zeroed: l_whence SEEK_SET, l_pid 0 as OFD locks need
        lock.set(JAVA_SHORT, 0, type);
        lock.set(JAVA_LONG, FLOCK_START_OFFSET, offset);
        lock.set(JAVA_LONG, FLOCK_LEN_OFFSET, length);
        return lock;
    }
}
