package io.mstar.transport.testing;

import io.mstar.transport.Deployment;
import io.mstar.transport.TransportConfig;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * A fresh directory on the real tmpfs ({@code /dev/shm}) for each test, checked after the test: any
 * file still in it is a leak and fails the test, then the directory is removed either way.
 */
public final class ShmTestDir implements BeforeEachCallback, AfterEachCallback {
    public static final Path SHM = Path.of("/dev/shm");

    private Path dir;

    public Path path() {
        return dir;
    }

    /** A deployment (default configuration) whose files live in this directory. */
    public Deployment deployment(String endpoint, String entity) {
        return deployment(dir, endpoint, entity);
    }

    /** A deployment (default configuration) whose files live in {@code dir}. */
    public static Deployment deployment(Path dir, String endpoint, String entity) {
        return Deployment.of(TransportConfig.from(Map.of(TransportConfig.SHM_DIR, dir.toString())::get), endpoint, entity);
    }

    @Override
    public void beforeEach(ExtensionContext context) throws IOException {
        dir = Files.createTempDirectory(SHM, "mstar-test-");
    }

    @Override
    public void afterEach(ExtensionContext context) throws IOException {
        List<String> left = list(dir);
        deleteTree(dir);
        if (!left.isEmpty() && context.getExecutionException().isEmpty()) {
            fail("test left files in its shared-memory directory: " + left);
        }
    }

    /** The names of the entries of a directory, sorted. */
    public static List<String> list(Path dir) {
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.map(p -> p.getFileName().toString()).sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The paths under a directory, relative to it, while the processes that own them create, rename and
     * delete them: an entry gone between the listing and its stat is left out, never an error.
     */
    public static List<String> tree(Path root) {
        List<String> names = new ArrayList<>();
        try {
            Files.walkFileTree(root, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                    names.add(root.relativize(dir).toString());
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                    names.add(root.relativize(file).toString());
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                    if (e instanceof NoSuchFileException) {
                        return FileVisitResult.CONTINUE;
                    }
                    throw e;
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return names;
    }

    public static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted((a, b) -> b.getNameCount() - a.getNameCount()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
