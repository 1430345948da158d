package io.mstar.transport.remote;

import io.aeron.Aeron;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.mstar.transport.Deployment;
import io.mstar.transport.RemoteConfig;
import io.mstar.transport.exceptions.ConfigurationException;
import io.mstar.transport.lifecycle.OwnedFile;
import io.mstar.transport.lifecycle.Owner;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * This process's Aeron client, with its media driver: a standalone one ({@value RemoteConfig#AERON_DIR}), or
 * one embedded in this process (the default), whose directory is a file of this library like any other:
 * {@code mstar_<ns>_aeron_<entity>_<nonce>} in the shared-memory directory, locked by its owner while it
 * lives and removed on close, or by the next sweep after a crash.
 */
final class AeronNode implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AeronNode.class);

    // Datagrams the socket cannot hold are lost and sent again after a NAK: milliseconds each. The link's
    // channels ask for buffers as large as the kernel allows up to 4 MiB, and a window of half the receive
    // buffer; on the channels, so that a standalone driver applies them too.
    static final int RCVBUF = socketBuffer("rmem_max");
    static final int SNDBUF = socketBuffer("wmem_max");

    private final OwnedFile ownedDir; // null with a standalone driver
    private final MediaDriver driver; // null with a standalone driver
    private final Aeron aeron;

    private AeronNode(OwnedFile ownedDir, MediaDriver driver, Aeron aeron) {
        this.ownedDir = ownedDir;
        this.driver = driver;
        this.aeron = aeron;
    }

    static AeronNode start(Deployment deployment) {
        RemoteConfig config = deployment.config().remote();
        if (config.aeronDir() != null) {
            if (!Files.isDirectory(config.aeronDir())) {
                throw new ConfigurationException("no Aeron media driver at " + RemoteConfig.AERON_DIR + "="
                    + config.aeronDir() + ": start the standalone driver there first, or unset it to embed one");
            }
            return new AeronNode(null, null, Aeron.connect(clientContext(config.aeronDir().toString())));
        }
        OwnedFile dir = OwnedFile.createDirectory(deployment.directory(),
            ShmNames.aeron(new Namespace(deployment.namespace()), deployment.entity(), Owner.newNonce()));
        MediaDriver driver = null;
        try {
            // Aeron removes and recreates its own directory: it lives inside ours, whose lock says we live.
            String driverDir = Path.of(dir.path(), "driver").toString();
            driver = MediaDriver.launch(new MediaDriver.Context()
                .aeronDirectoryName(driverDir)
                .dirDeleteOnStart(true)
                .dirDeleteOnShutdown(true)
                .threadingMode(ThreadingMode.SHARED) // one thread: inference nodes keep their cores
                .sharedIdleStrategy(new BackoffIdleStrategy(16, 8, 1_000, 100_000))
                .errorHandler(e -> LOG.warn("Aeron media driver: {}", e.toString())));
            return new AeronNode(dir, driver, Aeron.connect(clientContext(driverDir)));
        } catch (RuntimeException e) {
            if (driver != null) {
                driver.close();
            }
            dir.close();
            throw e;
        }
    }

    // Up to 4 MiB, as far as net.core.{rmem,wmem}_max allow (the kernel clamps larger requests silently).
    private static int socketBuffer(String sysctl) {
        try {
            // readAllLines: readString trusts the size /proc reports and may return a prefix
            long max = Long.parseLong(Files.readAllLines(Path.of("/proc/sys/net/core", sysctl)).getFirst().trim());
            return (int) Math.max(128 << 10, Math.min(4 << 20, max));
        } catch (IOException | RuntimeException e) {
            return 128 << 10;
        }
    }

    private static Aeron.Context clientContext(String dir) {
        return new Aeron.Context().aeronDirectoryName(dir)
            .errorHandler(e -> LOG.warn("Aeron client: {}", e.toString()));
    }

    Aeron aeron() {
        return aeron;
    }

    @Override
    public void close() {
        try {
            aeron.close();
        } finally {
            if (driver != null) {
                driver.close(); // removes the driver's directory
            }
            if (ownedDir != null) {
                ownedDir.close(); // then ours, empty by now
            }
        }
    }
}
