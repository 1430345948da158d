package io.mstar.transport.xbench;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.zip.CRC32C;

/**
 * What every scale producer shares, whichever transport it uses ({@link ScalePeer}, {@link ScaleAeronPeer}): the
 * launcher's files ({@code go}: start sending; {@code measure}: every worker's JIT is quiet, measure now), the
 * measured windows one after another, each printed as {@code RESULT payloads=N seconds=S p50us=.. p99us=..}, the
 * send-to-outcome samples of the window in progress, and the payload's fill and check.
 */
final class ScaleWindows {
    private final Path go;
    private final Path measure;
    private final long windowNs;
    private final int runs;
    private final long[] samples = new long[1 << 22];
    private int sampleCount;
    private boolean measuring;
    private int run = -1; // warming up
    private long nextLook;
    private long start;
    private long end;
    private long measuredFrom;

    ScaleWindows(String dir, double seconds, int runs) {
        this.go = Path.of(dir, "go");
        this.measure = Path.of(dir, "measure");
        this.windowNs = (long) (seconds * 1e9);
        this.runs = runs;
    }

    void awaitGo() throws InterruptedException {
        while (!Files.exists(go)) {
            Thread.sleep(1);
        }
    }

    /** Before each send ({@code seq} sent so far): whether to send another; prints each window as it ends. */
    boolean goOn(long seq) {
        long now = System.nanoTime();
        if (run < 0) {
            if (now - nextLook >= 0) { // a file's look is a system call: every 10 ms
                nextLook = now + 10_000_000L;
                if (Files.exists(measure)) {
                    run = 0;
                    begin(now, seq);
                    synchronized (this) {
                        measuring = true;
                    }
                }
            }
            return true;
        }
        if (now - end < 0) {
            return true;
        }
        long[] sorted;
        synchronized (this) {
            sorted = Arrays.copyOf(samples, sampleCount);
            sampleCount = 0;
        }
        Arrays.sort(sorted);
        System.out.printf(Locale.ROOT, "RESULT payloads=%d seconds=%.3f p50us=%.1f p99us=%.1f%n", seq - measuredFrom,
            (now - start) / 1e9, percentile(sorted, 0.50) / 1e3, percentile(sorted, 0.99) / 1e3);
        if (++run == runs) {
            return false;
        }
        begin(now, seq);
        return true;
    }

    /** One payload's send-to-outcome time, from any thread. */
    synchronized void record(long tookNs) {
        if (measuring && sampleCount < samples.length) {
            samples[sampleCount++] = tookNs;
        }
    }

    private void begin(long now, long seq) {
        start = now;
        end = now + windowNs;
        measuredFrom = seq;
    }

    private static double percentile(long[] sorted, double p) {
        return sorted.length == 0 ? Double.NaN : sorted[(int) Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
    }

    /** The one value every byte after a payload's 8-byte head holds. */
    static byte valueOf(long producer, long seq) {
        return (byte) ((producer * 0x9E3779B97F4A7C15L + seq * 0xBF58476D1CE4E5B9L) >>> 56);
    }

    /** Fills a payload: its head (producer and sequence number), then their value. */
    static void fill(MemorySegment payload, long producer, long seq) {
        payload.asSlice(8).fill(valueOf(producer, seq));
        payload.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, (producer << 40) | seq);
    }

    /** A consumer's check of every byte: CRC32C of the fill against the CRC of the value its head names. */
    static final class Check {
        private final long[] crcOfValue = new long[256];
        private final CRC32C crc = new CRC32C();
        private long received;
        private long bad;

        Check(long size) {
            byte[] fill = new byte[(int) size - 8];
            for (int v = 0; v < 256; v++) {
                Arrays.fill(fill, (byte) v);
                crc.reset();
                crc.update(fill);
                crcOfValue[v] = crc.getValue();
            }
        }

        /** Checks the payload between {@code payload}'s position and limit; returns its head. */
        long check(ByteBuffer payload) {
            long head = payload.order(ByteOrder.nativeOrder()).getLong(payload.position());
            payload.position(payload.position() + 8);
            crc.reset();
            crc.update(payload);
            if (crc.getValue() != crcOfValue[valueOf(head >>> 40, head & 0xFF_FFFF_FFFFL) & 0xFF]) {
                bad++;
            }
            received++;
            return head;
        }

        String result() {
            return "RESULT received=" + received + " bad=" + bad;
        }
    }
}
