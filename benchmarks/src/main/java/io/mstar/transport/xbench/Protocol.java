package io.mstar.transport.xbench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.zip.CRC32C;

/**
 * What every peer does alike. The producer fills each payload (every byte set to {@code seq} mod
 * {@link #values}) and sends it; the consumer computes CRC32C over every byte and compares it with the
 * CRC of the fill it expects next (payloads arrive in order), then ACKs; the producer keeps at most
 * {@link #window} payloads unACKed. A payload from a reused slot or a torn write fails the check.
 */
final class Protocol {
    /** The sizes every peer goes through; {@code -Dxbench.sizes=4096,65536} narrows them (e.g. to profile one). */
    static final long[] SIZES = Arrays.stream(System.getProperty("xbench.sizes", "4096,65536,1048576,16777216")
        .split(",")).mapToLong(Long::parseLong).toArray();

    private Protocol() {
    }

    /** Payloads in flight: 64, or 4 at 16 MiB and above. */
    static int window(long size) {
        return size >= 16 << 20 ? 4 : 64;
    }

    /** How many distinct fills a size uses: twice its window, so a payload of a reused slot never passes. */
    static int values(long size) {
        return 2 * window(size);
    }

    /**
     * The warm-up before each size's measured time: twice it, at most 5 s, or {@code xbench.warmUpS}. Fresh pairs
     * reach 0.8x of their steady 4 KiB rate after 1.75 to 3.5 s (warm-up curves, docs/benchmarks.md): Aeron once it
     * has written its 3 x 128 MiB log once (the first pass page-faults), the library once the JIT settled; a second
     * of warm-up measured Aeron at a third of its steady rate.
     */
    static double warmUpSeconds(double measured) {
        String set = System.getProperty("xbench.warmUpS"); // e.g. -Dxbench.jvmArgs=-Dxbench.warmUpS=0: a fresh pair
        return set == null ? Math.min(5.0, 2 * measured) : Double.parseDouble(set);
    }

    /** Sets every byte of the payload for {@code seq}: the producer's own fill. */
    static void fill(MemorySegment payload, long seq) {
        payload.fill((byte) (seq % values(payload.byteSize())));
    }

    static long crc(MemorySegment data) {
        CRC32C crc = new CRC32C();
        crc.update(data.asByteBuffer());
        return crc.getValue();
    }

    /** The consumer's check: the CRC of every fill of every size, computed once at start; checking allocates nothing. */
    static final class Verifier {
        private final long[][] expected = new long[SIZES.length][];
        private final CRC32C crc = new CRC32C();
        private long next;
        private long size = -1;
        private int sizeIndex = -1;
        private long corrupted;
        private long verified;
        // The consumer's cost per payload, measured from a second after each size's first payload to its last.
        private static final long COST_AFTER_NS = 1_000_000_000L;
        private long firstAt;
        private long[] costFrom;
        private long costFromSeq;
        private final StringBuilder costLines = new StringBuilder();

        Verifier() {
            try (Arena scratch = Arena.ofConfined()) {
                for (int i = 0; i < SIZES.length; i++) {
                    MemorySegment buffer = scratch.allocate(SIZES[i], 4096);
                    expected[i] = new long[values(SIZES[i])];
                    for (int v = 0; v < expected[i].length; v++) {
                        buffer.fill((byte) v);
                        expected[i][v] = crc(buffer);
                    }
                }
            }
        }

        /** Checks the next payload in order; returns false (and counts it) when a byte is wrong. */
        boolean check(MemorySegment payload) {
            return check(payload, 0, payload.byteSize());
        }

        /** As {@link #check(MemorySegment)}, for the payload at {@code [offset, offset + nbytes)} of {@code memory}. */
        boolean check(MemorySegment memory, long offset, long nbytes) {
            crc.reset();
            crc.update(memory.asSlice(offset, nbytes).asByteBuffer());
            return checkCrc(nbytes, crc.getValue());
        }

        /** As {@link #check(MemorySegment)}, for a payload of {@code nbytes} whose CRC32C the caller computed. */
        boolean checkCrc(long nbytes, long crcOfPayload) {
            if (nbytes != size) { // each size starts its sequence at 0
                endOfSize();
                size = nbytes;
                sizeIndex = Arrays.binarySearch(SIZES, nbytes);
                next = 0;
                firstAt = System.nanoTime();
                costFrom = null;
            }
            if (costFrom == null && System.nanoTime() - firstAt >= COST_AFTER_NS) {
                costFrom = Cost.snapshot();
                costFromSeq = next;
            }
            long seq = next++;
            boolean ok = sizeIndex >= 0 && crcOfPayload == expected[sizeIndex][(int) (seq % expected[sizeIndex].length)];
            if (ok) {
                verified++;
            } else {
                corrupted++;
            }
            return ok;
        }

        // The cost of the payloads of the size that ended, from a second after its first.
        private void endOfSize() {
            if (costFrom != null && next > costFromSeq) {
                costLines.append(Cost.line("consumer", size, costFrom, next - costFromSeq)).append('\n');
            }
        }

        /** The consumer's {@code COST} lines, then its verdict. */
        String summary() {
            endOfSize();
            costFrom = null;
            return costLines + Cost.jitLine("consumer") + "\nVERIFIED " + verified + " CORRUPTED " + corrupted;
        }
    }

    /** A single-process reference: {bytes/s} of memcpy, the fill, or CRC32C over {@code size} bytes. */
    static double reference(String what, long size, double seconds) {
        try (Arena arena = Arena.ofConfined()) {
            int copies = (int) Math.max(1, (256L << 20) / size); // rotate over 256 MiB: fresh memory like slots
            MemorySegment source = arena.allocate(size, 4096);
            source.fill((byte) 1);
            MemorySegment targets = arena.allocate(size * copies, 4096);
            targets.fill((byte) 0);
            long n = 0;
            long sink = 0;
            long start = System.nanoTime();
            while (System.nanoTime() - start < seconds * 1e9) {
                MemorySegment target = targets.asSlice((n++ % copies) * size, size);
                switch (what) {
                    case "memcpy" -> MemorySegment.copy(source, 0, target, 0, size);
                    case "fill" -> fill(target, n);
                    case "crc32c" -> sink += crc(target);
                    default -> throw new IllegalArgumentException(what);
                }
            }
            double elapsed = (System.nanoTime() - start) / 1e9;
            if (sink == 42) {
                System.out.print("");
            }
            return n * size / elapsed;
        }
    }

    static long readSeq(MemorySegment header) {
        return header.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
    }
}
