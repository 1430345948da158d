package io.mstar.transport.remote;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;

/**
 * The proofs that both ends of a connection hold the deployment's secret. The key is derived from the secret
 * with HKDF (RFC 5869) over the JDK's HMAC-SHA256; each side sends a fresh 32-byte nonce, and each proves
 * itself with HMAC-SHA256 over its role, both nonces and both entity names: a recorded handshake is worth
 * nothing on the next connection (the other side's nonce differs), a proof made for one pair of names does
 * not pass for another, and the client proves first, so a stranger gets nothing computed with the key.
 */
final class Handshake {
    private static final String HMAC = "HmacSHA256";
    private static final byte[] SALT = "mstar-transport cross-node path v1".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] INFO = "connection proof".getBytes(StandardCharsets.US_ASCII);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final SecretKeySpec key;

    /** @param secret the deployment's secret; empty (insecure mode) still runs the exchange, proving nothing */
    Handshake(byte[] secret) {
        this.key = new SecretKeySpec(hkdf(secret), HMAC);
    }

    static byte[] nonce() {
        byte[] nonce = new byte[RemoteProtocol.NONCE_BYTES];
        RANDOM.nextBytes(nonce);
        return nonce;
    }

    /** The proof of {@code client} (or, {@code client} false, of the server) for this connection. */
    byte[] proof(boolean client, byte[] clientNonce, byte[] serverNonce, String clientEntity, String serverEntity) {
        Mac mac = mac(key);
        mac.update((byte) (client ? 'C' : 'S'));
        mac.update(clientNonce);
        mac.update(serverNonce);
        for (String name : new String[] {clientEntity, serverEntity}) {
            byte[] bytes = name.getBytes(StandardCharsets.US_ASCII);
            mac.update((byte) bytes.length);
            mac.update(bytes);
        }
        return mac.doFinal();
    }

    /** Compares in constant time. */
    static boolean matches(byte[] expected, byte[] got) {
        return MessageDigest.isEqual(expected, got);
    }

    // HKDF-SHA256, extract then expand to one block: a key of 32 bytes.
    private static byte[] hkdf(byte[] secret) {
        Mac extract = mac(new SecretKeySpec(SALT, HMAC));
        byte[] prk = extract.doFinal(secret);
        Mac expand = mac(new SecretKeySpec(prk, HMAC));
        expand.update(INFO);
        expand.update((byte) 1);
        return expand.doFinal();
    }

    private static Mac mac(SecretKeySpec key) {
        try {
            Mac mac = Mac.getInstance(HMAC);
            mac.init(key);
            return mac;
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("the JDK lacks " + HMAC, e);
        }
    }
}
