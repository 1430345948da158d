package io.mstar.transport.lifecycle;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * {@code mstar_<ns>_stats_<entity>}: one {@code key=value} line, the latest stats snapshot of a live
 * arena, rewritten at each stats interval (when stats logging is on) so that {@code mstar-shm stats} can
 * read it from another process. Written to a temporary name and renamed, so readers never see half a
 * line; removed when the transport closes, and reclaimed with the rest of a dead deployment.
 */
public final class StatsFile {
    private StatsFile() {
    }

    public static String fileName(Namespace namespace, String entity) {
        return "mstar_" + namespace.id() + "_stats_" + ShmNames.checkEntity(entity);
    }

    public static void write(Path dir, Namespace namespace, String entity, String line) {
        Path target = dir.resolve(fileName(namespace, entity));
        Path temporary = dir.resolve(fileName(namespace, entity) + "_tmp");
        try {
            Files.deleteIfExists(temporary);
            try (SeekableByteChannel out = Files.newByteChannel(temporary,
                Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
                out.write(ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8)));
            }
            Files.move(temporary, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + target, e);
        }
    }

    public static void remove(Path dir, Namespace namespace, String entity) {
        try {
            Files.deleteIfExists(dir.resolve(fileName(namespace, entity)));
            Files.deleteIfExists(dir.resolve(fileName(namespace, entity) + "_tmp"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
