package io.mstar.transport.lifecycle;

import io.mstar.transport.Deployment;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;

import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.UUID;

/**
 * One owner of files in the shared-memory directory: a transport of one process, whose segments, spill
 * files and stats file carry its {@code nonce}. Built once and passed down, so names are made in one
 * place. Each file it creates is an {@link OwnedFile}, locked for as long as it exists.
 *
 * @param dir       the shared-memory directory
 * @param namespace the deployment's namespace
 * @param entity    the process's entity within the deployment
 * @param nonce     8 random hex digits, new for every owner
 */
public record Owner(Path dir, Namespace namespace, String entity, String nonce) {
    private static final SecureRandom RANDOM = new SecureRandom();

    public Owner {
        ShmNames.checkEntity(entity);
    }

    /** A new owner with a fresh nonce. */
    public static Owner create(Path dir, Namespace namespace, String entity) {
        return new Owner(dir, namespace, entity, newNonce());
    }

    /**
     * A new owner for a process of the deployment, in its shared-memory directory made ready first (the
     * default one is created 0700 and checked, {@link ShmDirectory}).
     */
    public static Owner of(Deployment deployment) {
        return create(ShmDirectory.prepare(deployment.directory()), new Namespace(deployment.namespace()), deployment.entity());
    }

    /** 8 random hex digits. */
    public static String newNonce() {
        byte[] random = new byte[4];
        RANDOM.nextBytes(random);
        return HexFormat.of().formatHex(random);
    }

    /** A random uuid for a tensor, not derivable from earlier ones ({@link TensorUuids}). */
    public static UUID newUuid() {
        return TensorUuids.newUuid();
    }

    public String segmentName(int index) {
        return ShmNames.segment(namespace, entity, nonce, index);
    }

    public String spillName(UUID uuid) {
        return ShmNames.spill(namespace, entity, nonce, uuid);
    }

    public String statsName() {
        return ShmNames.stats(namespace, entity, nonce);
    }
}
