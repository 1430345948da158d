package io.mstar.transport.crossprocess;

import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.testing.ChildJvm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Starts, stops and kills {@link Node} processes of one shared-memory directory. */
final class Nodes {
    private final Path dir;

    Nodes(Path dir) {
        this.dir = dir;
    }

    ChildJvm consumer(String endpoint, String entity, long delayMs, String... env) throws Exception {
        return consumer(List.of(), endpoint, entity, delayMs, env);
    }

    /** A consumer that runs until its stop file appears, started with extra JVM options. */
    ChildJvm consumer(List<String> jvmOptions, String endpoint, String entity, long delayMs, String... env)
        throws Exception {
        List<String> args = new ArrayList<>(List.of("consumer", dir.toString(), endpoint, entity, "-1",
            Long.toString(delayMs)));
        args.addAll(List.of(env));
        return started(ChildJvm.start(true, jvmOptions, Map.of(), Node.class, args.toArray(String[]::new)),
            endpoint, entity);
    }

    ChildJvm producer(String endpoint, String entity, String consumer, int tensors, long seed, int maxMb, String... env)
        throws Exception {
        return producer(List.of(), endpoint, entity, consumer, tensors, seed, maxMb, env);
    }

    /** A producer started with extra JVM options; {@code consumers} is a comma-separated list. */
    ChildJvm producer(List<String> jvmOptions, String endpoint, String entity, String consumers, int tensors, long seed,
                      int maxMb, String... env) throws Exception {
        List<String> args = new ArrayList<>(List.of("producer", dir.toString(), endpoint, entity, consumers,
            Integer.toString(tensors), Long.toString(seed), Integer.toString(maxMb)));
        args.addAll(List.of(env));
        return started(ChildJvm.start(true, jvmOptions, Map.of(), Node.class, args.toArray(String[]::new)),
            endpoint, entity);
    }

    /** Waits until the child runs (its mailbox exists), so a kill hits a running process. */
    ChildJvm started(ChildJvm child, String endpoint, String entity) throws Exception {
        Path mailbox = dir.resolve(ShmNames.mailbox(Namespace.of(null, endpoint), entity));
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (!Files.exists(mailbox)) {
            assertTrue(System.nanoTime() < deadline && child.process().isAlive(), entity + " did not start:\n"
                + child.output());
            Thread.sleep(5);
        }
        return child;
    }

    /** Lets a child stop on its own (its stop file), checks its exit code and returns its output. */
    String stop(ChildJvm child, String entity, int expectedExit) throws Exception {
        Path stopFile = Node.stopFile(dir.toString(), entity);
        Files.createFile(stopFile);
        try {
            return expectExit(child, expectedExit);
        } finally {
            Files.delete(stopFile);
        }
    }

    static String expectExit(ChildJvm child, int expectedExit) throws Exception {
        int code = child.await(180);
        String out = child.output();
        assertEquals(expectedExit, code, out);
        child.deleteLog();
        return out;
    }

    /** As {@link ChildJvm#await}; a hang also reports what {@code peer} was doing (a hang is often the peer's). */
    static int await(ChildJvm child, long timeoutSeconds, ChildJvm peer) throws Exception {
        try {
            return child.await(timeoutSeconds);
        } catch (AssertionError e) {
            throw new AssertionError(e.getMessage() + "\nits peer: " + peer.state(), e);
        }
    }

    static void kill(ChildJvm child) throws Exception {
        child.process().destroyForcibly().waitFor();
        child.deleteLog();
    }
}
