package io.mstar.transport.naming;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.regex.Pattern;

/**
 * A deployment's namespace: 16 hex digits that prefix every file of one deployment, so that its
 * processes find each other's files and cleanup never touches another deployment's.
 *
 * <p>{@code ns} = the first 16 hex digits of SHA-1 of {@code token + "\0" + "ipc://" + path}, or of
 * {@code "ipc://" + path} when no token is set (an empty token is unset), where {@code path} is the
 * endpoint without its {@code ipc://} scheme, if it has one: the same rule as the M* Python arena, so
 * both languages agree on file names whichever way the endpoint is written.
 */
public record Namespace(String id) {
    private static final Pattern ID = Pattern.compile("[0-9a-f]{16}");

    public Namespace {
        if (!ID.matcher(id).matches()) {
            throw new IllegalArgumentException("namespace must be 16 lower-case hex digits: id=" + id);
        }
    }

    private static final String SCHEME = "ipc://";

    /**
     * @param token    the per-launch {@code MSTAR_DEPLOYMENT_TOKEN}, or {@code null}/empty when unset
     * @param endpoint the deployment's endpoint, with or without {@code ipc://}; every process of the
     *                 deployment passes the same one
     */
    public static Namespace of(String token, String endpoint) {
        String path = endpoint != null && endpoint.startsWith(SCHEME) ? endpoint.substring(SCHEME.length()) : endpoint;
        if (path == null || path.isEmpty()) {
            throw new IllegalArgumentException("endpoint must name the deployment: endpoint=" + endpoint);
        }
        String material = (token == null || token.isEmpty() ? "" : token + "\0") + SCHEME + path;
        try {
            byte[] digest = MessageDigest.getInstance("SHA-1").digest(material.getBytes(StandardCharsets.UTF_8));
            return new Namespace(HexFormat.of().formatHex(digest).substring(0, 16));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-1 is required of every JDK", e);
        }
    }

    @Override
    public String toString() {
        return id;
    }
}
