package io.mstar.transport.codec;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The names that repeat on every record (a producer's, its segments'), kept as bytes: the encoder copies
 * a known name's bytes in one go, and the decoder hands back the {@code String} of a name it saw lately,
 * compared eight bytes at a time, so a repeated name allocates nothing either way.
 */
final class KnownNames {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final int ENTRIES = 16;
    private static final Name[] ENCODED = new Name[ENTRIES]; // shared by every thread; entries are immutable
    private static int nextEncoded; // racy on purpose: a lost update only replaces another entry
    private static final ThreadLocal<Recent> DECODED = ThreadLocal.withInitial(Recent::new);

    private KnownNames() {
    }

    /** The ISO-8859-1 bytes of an ASCII name, {@code name.length()} of them. */
    static MemorySegment encoded(String name) {
        for (Name e : ENCODED) {
            if (e != null && e.name == name) {
                return e.segment;
            }
        }
        for (Name e : ENCODED) {
            if (e != null && e.name.equals(name)) {
                return e.segment;
            }
        }
        Name e = new Name(name);
        ENCODED[nextEncoded++ & (ENTRIES - 1)] = e;
        return e.segment;
    }

    /**
     * The name in the {@code n} bytes at {@code offset}: one this thread decoded lately, or a new one.
     *
     * @throws io.mstar.transport.exceptions.DescriptorFormatException naming {@code field} when it is not ASCII
     */
    static String decoded(MemorySegment src, long offset, int n, String field) {
        return DECODED.get().name(src, offset, n, field);
    }

    /** This thread's scratch array to decode a string from, {@link DescriptorCodec#MAX_REQUEST_ID_BYTES} long. */
    static byte[] scratch() {
        return DECODED.get().scratch;
    }

    /** The names one thread decoded last. */
    private static final class Recent {
        final byte[] scratch = new byte[DescriptorCodec.MAX_REQUEST_ID_BYTES];
        private final Name[] names = new Name[ENTRIES];
        private int next;
        private int lastHit;

        String name(MemorySegment src, long offset, int n, String field) {
            for (int k = 0; k < ENTRIES; k++) {
                int i = (lastHit + k) % ENTRIES; // a record's names alternate: try where the last one was
                if (names[i] != null && names[i].matches(src, offset, n)) {
                    lastHit = i + 1;
                    return names[i].name;
                }
            }
            String name = DescriptorCodec.decodeString(src, offset, n, field, false);
            names[next] = new Name(name);
            next = (next + 1) % ENTRIES;
            return name;
        }
    }

    /** An ASCII name, its bytes, and those bytes as little-endian words, the last word ending at the name's end. */
    private static final class Name {
        final String name;
        final MemorySegment segment;
        private final byte[] bytes;
        private final long[] words;

        Name(String name) {
            this.name = name;
            this.bytes = name.getBytes(StandardCharsets.ISO_8859_1);
            this.segment = MemorySegment.ofArray(bytes);
            int n = bytes.length;
            words = new long[n < 8 ? 0 : (n + 7) / 8];
            for (int i = 0, w = 0; n >= 8 && w < words.length; i += 8, w++) {
                words[w] = segment.get(LONG, Math.min(i, n - 8)); // the last word overlaps the one before
            }
        }

        boolean matches(MemorySegment src, long offset, int n) {
            if (n != bytes.length) {
                return false;
            }
            if (n < 8) {
                for (int i = 0; i < n; i++) {
                    if (src.get(ValueLayout.JAVA_BYTE, offset + i) != bytes[i]) {
                        return false;
                    }
                }
                return true;
            }
            for (int w = 0; w < words.length; w++) {
                if (src.get(LONG, offset + Math.min(8L * w, n - 8)) != words[w]) {
                    return false;
                }
            }
            return true;
        }
    }
}
