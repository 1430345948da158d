package io.mstar.transport.endpoint;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * The descriptor records a reader without a handler took from the mailbox (the ACK thread, a sender reading its
 * ACKs), or a poll left when its handler threw, copied and waiting for the next poll, in ring order. Each keeps the
 * end of its message in the ring when it is that message's last record (else 0), for the handled position.
 * Guarded by {@link MailboxReading}'s reading lock, except {@link #anyParked}, which any thread may ask.
 */
final class ParkedRecords {
    private final ArrayDeque<Parked> parked = new ArrayDeque<>();
    private volatile boolean any;
    /** Whether records wait: a thread in receive need not sleep. Made once: a wait allocates nothing. */
    final BooleanSupplier anyParked = () -> any;

    void add(String from, MemorySegment record, long offset, int length) {
        parked.add(new Parked(from, record.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE), 0));
        any = true;
    }

    /** The last record parked ends its message at {@code position} in the ring. */
    void endsMessage(long position) {
        if (!parked.isEmpty()) {
            Parked last = parked.pollLast();
            parked.addLast(new Parked(last.from(), last.record(), position));
        }
    }

    /** Moves up to {@code limit} records, oldest first, into a poll's batch; returns how many. */
    int moveTo(RecordBatch batch, int limit) {
        int moved = 0;
        while (moved < limit && !parked.isEmpty()) {
            Parked p = parked.poll();
            batch.add(p.from(), MemorySegment.ofArray(p.record()), 0, p.record().length, p.end());
            moved++;
        }
        any = !parked.isEmpty();
        return moved;
    }

    /** Parks a batch's records from index {@code first} on, ahead of any parked since: the next poll hands them over. */
    void parkFrom(RecordBatch batch, int first) {
        for (int k = batch.size() - 1; k >= first; k--) {
            parked.addFirst(new Parked(batch.from(k),
                batch.records().asSlice(batch.at(k), batch.length(k)).toArray(ValueLayout.JAVA_BYTE), batch.end(k)));
        }
        any = !parked.isEmpty();
    }

    /** Takes every parked record (no poll will come). */
    List<Parked> takeAll() {
        List<Parked> all = List.copyOf(parked);
        parked.clear();
        any = false;
        return all;
    }

    boolean any() {
        return any;
    }

    record Parked(String from, byte[] record, long end) {
    }
}
