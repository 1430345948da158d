package io.mstar.transport.posix;

import io.mstar.transport.exceptions.NativeCallException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Map;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * libc calls through the FFM {@link Linker}: no JNI, no JNA. Every failing call throws a
 * {@link NativeCallException} naming the call, the errno (name and text) and the path.
 *
 * <p>Supports Linux on x86-64 and aarch64, where the flag values and {@code struct stat} differ; the
 * class refuses to load elsewhere rather than pass wrong flags to the kernel.
 */
public final class Posix {
    private Posix() {
    }

    static final boolean AARCH64 = switch (System.getProperty("os.arch")) {
        case "amd64", "x86_64" -> false;
        case "aarch64" -> true;
        default -> throw new UnsupportedOperationException(
            "unsupported platform: os.arch=" + System.getProperty("os.arch") + ", supported: amd64, aarch64 (Linux)");
    };

    public static final int O_RDONLY = 0;
    public static final int O_RDWR = 2;
    public static final int O_CREAT = 0x40;
    public static final int O_EXCL = 0x80;
    public static final int O_NOFOLLOW = AARCH64 ? 0x8000 : 0x20000;
    public static final int O_CLOEXEC = 0x80000;
    public static final int O_NONBLOCK = 0x800;
    public static final int O_DIRECTORY = AARCH64 ? 0x4000 : 0x10000;

    public static final int PROT_READ = 1;
    public static final int PROT_WRITE = 2;
    public static final int MAP_SHARED = 1;
    public static final int MAP_POPULATE = 0x8000;

    public static final int S_IFMT = 0xF000;
    public static final int S_IFREG = 0x8000;
    public static final int S_IFLNK = 0xA000;
    public static final int S_IFDIR = 0x4000;

    public static final int LOCK_SH = 1;
    public static final int LOCK_EX = 2;
    public static final int LOCK_NB = 4;
    public static final int LOCK_UN = 8;

    public static final int ENOENT = 2;
    public static final int ELOOP = 40;
    public static final int EWOULDBLOCK = 11;
    public static final int EACCES = 13;
    public static final int EEXIST = 17;
    public static final int ENOSPC = 28;
    public static final int EINTR = 4;
    public static final int ETIMEDOUT = 110;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
        CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    private static final MethodHandle OPEN = errnoCall("open",
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2));
    private static final MethodHandle CLOSE = errnoCall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle UNLINK = errnoCall("unlink", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle PREAD = errnoCall("pread",
        FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle PWRITE = errnoCall("pwrite",
        FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle RENAME = errnoCall("rename", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle FSTAT = errnoCall("fstat", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle LSTAT = errnoCall("lstat", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle FLOCK = errnoCall("flock", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle STATVFS = errnoCall("statvfs", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle MMAP = errnoCall("mmap",
        FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = errnoCall("munmap", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG));
    // posix_fallocate returns the error number instead of setting errno.
    private static final MethodHandle POSIX_FALLOCATE = plainCall("posix_fallocate",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle GETEUID = plainCall("geteuid", FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle STRERROR = plainCall("strerror", FunctionDescriptor.of(ADDRESS, JAVA_INT));

    // struct statvfs is all unsigned longs up to f_namemax on both supported platforms.
    private static final long STATVFS_SIZE = 112;
    private static final long STATVFS_FRSIZE_OFFSET = 8;
    private static final long STATVFS_BLOCKS_OFFSET = 16;
    private static final long STATVFS_BAVAIL_OFFSET = 32;

    private static final long STAT_SIZE = 144;
    private static final long STAT_MODE_OFFSET = AARCH64 ? 16 : 24;
    private static final long STAT_UID_OFFSET = AARCH64 ? 24 : 28;
    private static final long STAT_SIZE_OFFSET = 48;
    private static final long STAT_INO_OFFSET = 8;

    private static final Map<Integer, String> ERRNO_NAMES = Map.ofEntries(
        Map.entry(1, "EPERM"), Map.entry(2, "ENOENT"), Map.entry(4, "EINTR"), Map.entry(5, "EIO"),
        Map.entry(9, "EBADF"), Map.entry(11, "EAGAIN"), Map.entry(12, "ENOMEM"), Map.entry(13, "EACCES"),
        Map.entry(16, "EBUSY"), Map.entry(17, "EEXIST"), Map.entry(19, "ENODEV"), Map.entry(20, "ENOTDIR"),
        Map.entry(21, "EISDIR"), Map.entry(22, "EINVAL"), Map.entry(23, "ENFILE"), Map.entry(24, "EMFILE"),
        Map.entry(27, "EFBIG"), Map.entry(28, "ENOSPC"), Map.entry(30, "EROFS"), Map.entry(36, "ENAMETOOLONG"),
        Map.entry(40, "ELOOP"), Map.entry(75, "EOVERFLOW"), Map.entry(95, "EOPNOTSUPP"), Map.entry(122, "EDQUOT"));

    /** What {@code fstat} says of an open file. */
    public record FileStatus(int mode, int uid, long sizeBytes, long inode) {
        public boolean isRegularFile() {
            return (mode & S_IFMT) == S_IFREG;
        }
    }

    /** What {@code statvfs} says of a file system: its total size and the bytes an unprivileged user may still take. */
    public record FileSystemSpace(long totalBytes, long availableBytes) {
    }

    /** {@code open(path, flags, mode)}; returns the file descriptor. */
    public static int open(String path, int flags, int mode) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path), flags, mode);
            if (fd < 0) {
                throw failure("open", state, path);
            }
            return fd;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code close(fd)}; an error is reported but the descriptor is gone either way. */
    public static void close(int fd, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            if ((int) CLOSE.invokeExact(state, fd) != 0) {
                throw failure("close", state, path);
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code unlink(path)}; returns false when the file was already gone. */
    public static boolean unlink(String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            if ((int) UNLINK.invokeExact(state, arena.allocateFrom(path)) != 0) {
                if (errno(state) == ENOENT) {
                    return false;
                }
                throw failure("unlink", state, path);
            }
            return true;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code rename(from, to)}: atomically replaces {@code to}. */
    public static void rename(String from, String to) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            if ((int) RENAME.invokeExact(state, arena.allocateFrom(from), arena.allocateFrom(to)) != 0) {
                throw failure("rename", state, from + " -> " + to);
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code pread(fd, buf, n, offset)} into a fresh array; returns the bytes read (fewer at the end of the file). */
    public static byte[] pread(int fd, int lengthBytes, long offset, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment buf = arena.allocate(Math.max(1, lengthBytes));
            long n = (long) PREAD.invokeExact(state, fd, buf, (long) lengthBytes, offset);
            if (n < 0) {
                throw failure("pread", state, path);
            }
            return buf.asSlice(0, n).toArray(JAVA_BYTE);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code pwrite(fd, bytes, n, offset)} until every byte is written. */
    public static void pwrite(int fd, byte[] bytes, long offset, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment buf = arena.allocateFrom(JAVA_BYTE, bytes);
            for (long done = 0; done < bytes.length; ) {
                long n = (long) PWRITE.invokeExact(state, fd, buf.asSlice(done), bytes.length - done, offset + done);
                if (n < 0) {
                    throw failure("pwrite", state, path);
                }
                done += n;
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code posix_fallocate(fd, 0, length)}: commits the file's pages now, so a full tmpfs fails here and not as SIGBUS later. */
    public static void fallocate(int fd, long lengthBytes, String path) {
        int error;
        try {
            error = (int) POSIX_FALLOCATE.invokeExact(fd, 0L, lengthBytes);
        } catch (Throwable t) {
            throw rethrow(t);
        }
        if (error != 0) {
            throw failure("posix_fallocate", error, path);
        }
    }

    /** {@code fstat(fd)}. */
    public static FileStatus fstat(int fd, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment stat = arena.allocate(STAT_SIZE, 8);
            if ((int) FSTAT.invokeExact(state, fd, stat) != 0) {
                throw failure("fstat", state, path);
            }
            return status(stat);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static FileStatus status(MemorySegment stat) {
        return new FileStatus(stat.get(JAVA_INT, STAT_MODE_OFFSET), stat.get(JAVA_INT, STAT_UID_OFFSET),
            stat.get(JAVA_LONG, STAT_SIZE_OFFSET), stat.get(JAVA_LONG, STAT_INO_OFFSET));
    }

    /**
     * {@code lstat(path)}: what is at the name itself (a link is not followed), without opening it, so it
     * needs no descriptor and never waits on a FIFO; null when nothing is there.
     */
    public static FileStatus lstat(String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment stat = arena.allocate(STAT_SIZE, 8);
            if ((int) LSTAT.invokeExact(state, arena.allocateFrom(path), stat) != 0) {
                if (errno(state) == ENOENT) {
                    return null;
                }
                throw failure("lstat", state, path);
            }
            return status(stat);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code flock(fd, operation)}; with {@code LOCK_NB}, returns false when another holder prevents it.
     * Interrupted waits are retried.
     */
    public static boolean flock(int fd, int operation, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            while ((int) FLOCK.invokeExact(state, fd, operation) != 0) {
                int errno = errno(state);
                if (errno == EWOULDBLOCK && (operation & LOCK_NB) != 0) {
                    return false;
                }
                if (errno != 4) { // EINTR: try again
                    throw failure("flock", errno, path);
                }
            }
            return true;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code statvfs(path)}: the size of the file system holding path and what is still available. */
    public static FileSystemSpace statvfs(String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment buf = arena.allocate(STATVFS_SIZE, 8);
            if ((int) STATVFS.invokeExact(state, arena.allocateFrom(path), buf) != 0) {
                throw failure("statvfs", state, path);
            }
            long fragment = buf.get(JAVA_LONG, STATVFS_FRSIZE_OFFSET);
            return new FileSystemSpace(buf.get(JAVA_LONG, STATVFS_BLOCKS_OFFSET) * fragment,
                buf.get(JAVA_LONG, STATVFS_BAVAIL_OFFSET) * fragment);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code mmap(NULL, length, prot, flags, fd, 0)}; returns the address. */
    public static long mmap(long lengthBytes, int prot, int flags, int fd, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            long address = (long) MMAP.invokeExact(state, 0L, lengthBytes, prot, flags, fd, 0L);
            if (address == -1L) {
                throw failure("mmap", state, path);
            }
            return address;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code munmap(address, length)}. */
    public static void munmap(long address, long lengthBytes, String path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            if ((int) MUNMAP.invokeExact(state, address, lengthBytes) != 0) {
                throw failure("munmap", state, path);
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The effective uid of this process. */
    public static int geteuid() {
        try {
            return (int) GETEUID.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The symbolic name of an errno value, e.g. {@code ENOSPC}, or {@code errno<n>} when not in the table. */
    public static String errnoName(int errno) {
        return ERRNO_NAMES.getOrDefault(errno, "errno" + errno);
    }

    /** libc's text for an errno value. */
    public static String errnoText(int errno) {
        try {
            MemorySegment text = (MemorySegment) STRERROR.invokeExact(errno);
            return text.reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    static NativeCallException failure(String call, MemorySegment state, String path) {
        return failure(call, errno(state), path);
    }

    static NativeCallException failure(String call, int errno, String path) {
        return new NativeCallException(call, errno, errnoName(errno), errnoText(errno), path);
    }

    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException("native call failed unexpectedly", t);
    }

    static MethodHandle errnoCall(String name, FunctionDescriptor descriptor, Linker.Option... extra) {
        Linker.Option[] options = new Linker.Option[extra.length + 1];
        options[0] = CAPTURE_ERRNO;
        System.arraycopy(extra, 0, options, 1, extra.length);
        return LINKER.downcallHandle(symbol(name), descriptor, options);
    }

    static MethodHandle plainCall(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        return LINKER.downcallHandle(symbol(name), descriptor, options);
    }

    private static MemorySegment symbol(String name) {
        return LIBC.find(name).orElseThrow(() -> new UnsatisfiedLinkError("libc has no symbol " + name));
    }
}
