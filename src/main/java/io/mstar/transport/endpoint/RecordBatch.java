package io.mstar.transport.endpoint;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * The descriptor records one poll took from the mailbox, copied out so that their handlers run after the mailbox
 * is let go ({@link MailboxReading}). One area and parallel arrays, grown when full and reused poll after poll: a
 * poll allocates nothing in steady state. Not thread-safe: the handling lock guards it.
 */
final class RecordBatch {
    private MemorySegment area = MemorySegment.ofArray(new byte[16 << 10]);
    private String[] froms = new String[64];
    private long[] ats = new long[64];
    private int[] lengths = new int[64];
    private long[] ends = new long[64]; // a message's end position in the ring on its last record, else 0
    private int count;
    private long end;

    void add(String from, MemorySegment record, long offset, int length, long messageEnd) {
        if (count == froms.length) {
            froms = Arrays.copyOf(froms, 2 * count);
            ats = Arrays.copyOf(ats, 2 * count);
            lengths = Arrays.copyOf(lengths, 2 * count);
            ends = Arrays.copyOf(ends, 2 * count);
        }
        ends[count] = messageEnd;
        if (end + length > area.byteSize()) {
            MemorySegment bigger = MemorySegment.ofArray(new byte[(int) Math.max(2 * area.byteSize(), end + length)]);
            MemorySegment.copy(area, 0, bigger, 0, end);
            area = bigger;
        }
        MemorySegment.copy(record, ValueLayout.JAVA_BYTE, offset, area, ValueLayout.JAVA_BYTE, end, length);
        froms[count] = from;
        ats[count] = end;
        lengths[count] = length;
        end += length;
        count++;
    }

    /** The last record added ends its message, at {@code position} in the ring. */
    void endsMessage(long position) {
        if (count > 0) {
            ends[count - 1] = position;
        }
    }

    long end(int i) {
        return ends[i];
    }

    int size() {
        return count;
    }

    MemorySegment records() {
        return area;
    }

    String from(int i) {
        return froms[i];
    }

    long at(int i) {
        return ats[i];
    }

    int length(int i) {
        return lengths[i];
    }

    void clear() {
        Arrays.fill(froms, 0, count, null);
        count = 0;
        end = 0;
    }
}
