package io.mstar.transport.lifecycle;

import io.mstar.transport.posix.Posix;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SecureDirectoryStream;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Map;
import java.util.function.ToLongFunction;

/**
 * What a shared-memory directory holds, read without following links, and removal through directory
 * handles: the shared-memory directory is writable by every user (sticky {@code /dev/shm}), so any path
 * inside it may be a link another user swapped in. Trees are removed with {@code openat}/{@code unlinkat}
 * ({@link SecureDirectoryStream}) from the handle of the directory that holds each entry, never by path.
 */
public final class DirectoryEntries {
    private DirectoryEntries() {
    }

    /** An entry as one {@code lstat} saw it: its owner and its type. */
    public record Seen(int uid, int mode) {

        public boolean isSymbolicLink() {
            return (mode & Posix.S_IFMT) == Posix.S_IFLNK;
        }

        public boolean isRegularFile() {
            return (mode & Posix.S_IFMT) == Posix.S_IFREG;
        }

        public boolean isDirectory() {
            return (mode & Posix.S_IFMT) == Posix.S_IFDIR;
        }

        /** A FIFO, a socket or a device node: nothing the library ever makes. */
        public boolean isSpecial() {
            return !isRegularFile() && !isSymbolicLink() && !isDirectory();
        }
    }

    /** An entry as it is now, its links not followed; null when it is gone. */
    public static Seen seen(Path entry) {
        try {
            Map<String, Object> a = Files.readAttributes(entry, "unix:uid,mode", LinkOption.NOFOLLOW_LINKS);
            return new Seen((Integer) a.get("uid"), (Integer) a.get("mode"));
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    /** The uid that owns {@code entry} (the link itself for a link), or -1 when it is gone. */
    public static int ownerUid(Path entry) {
        Seen seen = seen(entry);
        return seen == null ? -1 : seen.uid();
    }

    /** Whether the invoking user owns {@code entry} (false when it is gone). */
    public static boolean ours(Path entry) {
        return ownerUid(entry) == Posix.geteuid();
    }

    /**
     * Removes {@code dir/name} and everything under it through directory handles (a link is removed, never
     * followed); returns the bytes of the regular files removed. What cannot be removed is left.
     *
     * @throws IOException when {@code dir} cannot be opened as a directory stream with handles
     */
    public static long deleteTree(Path dir, String name) throws IOException {
        return throughHandle(dir, handle -> delete(handle, Path.of(name)));
    }

    /** Removes every entry of {@code dir} through its handle, as {@link #deleteTree}; {@code dir} stays. */
    public static long deleteContents(Path dir) throws IOException {
        return throughHandle(dir, DirectoryEntries::deleteEntries);
    }

    private static long throughHandle(Path dir, ToLongFunction<SecureDirectoryStream<Path>> action) throws IOException {
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir)) {
            if (!(stream instanceof SecureDirectoryStream<Path> handle)) {
                throw new IOException("this platform removes no files through directory handles: " + dir);
            }
            return action.applyAsLong(handle);
        }
    }

    private static long deleteEntries(SecureDirectoryStream<Path> dir) {
        long bytes = 0;
        for (Path entry : dir) {
            bytes += delete(dir, entry.getFileName());
        }
        return bytes;
    }

    // One entry of `parent`, by name: a directory is opened without following links and emptied first.
    private static long delete(SecureDirectoryStream<Path> parent, Path name) {
        try {
            BasicFileAttributes a = parent.getFileAttributeView(name, BasicFileAttributeView.class,
                LinkOption.NOFOLLOW_LINKS).readAttributes();
            if (a.isDirectory()) {
                long bytes;
                try (SecureDirectoryStream<Path> child = parent.newDirectoryStream(name, LinkOption.NOFOLLOW_LINKS)) {
                    bytes = deleteEntries(child);
                }
                parent.deleteDirectory(name);
                return bytes;
            }
            parent.deleteFile(name); // a file, or a link itself
            return a.isRegularFile() ? a.size() : 0;
        } catch (NoSuchFileException e) {
            return 0;
        } catch (IOException e) {
            return 0; // swapped meanwhile, or not ours to remove: left in place
        }
    }
}
