package io.mstar.transport.channel;

import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.exceptions.MstarTransportException;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Collection;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.function.ToIntFunction;

import static org.agrona.BitUtil.align;
import static org.agrona.concurrent.ringbuffer.RecordDescriptor.ALIGNMENT;
import static org.agrona.concurrent.ringbuffer.RecordDescriptor.HEADER_LENGTH;

/**
 * The sending side of a mailbox: messages laid out as {@link MailboxMessage} says, written into peers' rings
 * with Agrona's claim and commit from one message buffer per sending thread ({@link Outbox}: sends allocate none), or
 * written in place ({@link #writeByPosition}), packed
 * into as few ring messages as a ring's message limit allows, and each followed by the peer's
 * {@link Doorbell}. A full ring is waited on, up to {@value #SEND_TIMEOUT_NS} ns, and given up on at once when
 * its reader died. Every method is called between the mailbox's {@code enter()} and {@code exit()}.
 */
final class RingWriter {
    static final long SEND_TIMEOUT_NS = 30_000_000_000L;

    private final PeerMailboxes peers;
    private final byte[] entityAscii; // the sender name every message starts with
    private final BooleanSupplier closed;
    private final Supplier<RuntimeException> closedException;
    private final ThreadLocal<Outbox> outboxes = ThreadLocal.withInitial(Outbox::allocate);

    RingWriter(PeerMailboxes peers, byte[] entityAscii, BooleanSupplier closed, Supplier<RuntimeException> closedException) {
        this.peers = peers;
        this.entityAscii = entityAscii;
        this.closed = closed;
        this.closedException = closedException;
    }

    /**
     * One sending thread's message buffer, as large as any peer's largest message, with the two views that
     * encoding and the ring need: made once per thread.
     */
    record Outbox(ByteBuffer message, MemorySegment segment, UnsafeBuffer buffer) {
        static Outbox allocate() {
            ByteBuffer message = ByteBuffer.allocate(MailboxDescriptor.RING_BYTES / 8).order(ByteOrder.LITTLE_ENDIAN);
            return new Outbox(message, MemorySegment.ofArray(message.array()), new UnsafeBuffer(message.array()));
        }
    }

    /** Writes one descriptor record as a message; returns the key of the incarnation that got it. */
    String writeRecord(String toEntity, MemorySegment record, long offset, int length) {
        PeerMailbox peer = peers.get(toEntity);
        Outbox out = outboxes.get();
        MailboxMessage.start(out.message, entityAscii);
        MemorySegment.copy(record, offset, out.segment, out.message.position(), length);
        out.message.position(out.message.position() + length);
        flush(peer, MailboxMessage.DESCRIPTORS, out, 1);
        return peer.key();
    }

    /** Writes one ACK or refusal as a message. */
    void writeOne(String toEntity, int type, long uuidMsb, long uuidLsb) {
        PeerMailbox peer = peers.get(toEntity);
        Outbox out = outboxes.get();
        MailboxMessage.start(out.message, entityAscii);
        out.message.putLong(uuidMsb).putLong(uuidLsb);
        flush(peer, type, out, 1);
    }

    /** Writes {@code count} ACKs given as uuid halves, packed. */
    void writeAcks(String toEntity, long[] uuidHalves, int count) {
        PeerMailbox peer = peers.get(toEntity);
        int max = peer.ring.maxMsgLength();
        Outbox out = outboxes.get();
        int inMessage = 0;
        for (int k = 0; k < count; k++) {
            if (inMessage == 0) {
                MailboxMessage.start(out.message, entityAscii);
            }
            out.message.putLong(uuidHalves[2 * k]).putLong(uuidHalves[2 * k + 1]);
            inMessage++;
            if (out.message.position() + MailboxMessage.UUID_LENGTH > max) {
                flush(peer, MailboxMessage.ACKS, out, inMessage);
                inMessage = 0;
            }
        }
        if (inMessage > 0) {
            flush(peer, MailboxMessage.ACKS, out, inMessage);
        }
    }

    /** Packs items into as few messages as the ring's limit allows, in order; returns the incarnation's key. */
    <T> String writeBatched(String toEntity, int type, Collection<T> items, ToIntFunction<T> length,
                            BiConsumer<Outbox, T> write) {
        PeerMailbox peer = peers.get(toEntity);
        int max = peer.ring.maxMsgLength();
        Outbox out = outboxes.get();
        ByteBuffer message = out.message;
        int count = 0;
        for (T item : items) {
            if (count > 0 && message.position() + length.applyAsInt(item) > max) {
                flush(peer, type, out, count);
                count = 0;
            }
            if (count == 0) {
                MailboxMessage.start(message, entityAscii);
            }
            write.accept(out, item);
            count++;
        }
        if (count > 0) {
            flush(peer, type, out, count);
        }
        return peer.key();
    }

    /**
     * Writes one descriptor record, flagged to be delivered by position, in place into the peer's ring, and
     * remembers where it ends there ({@link SentByPosition}); returns the incarnation that got it.
     */
    PeerMailbox writeByPosition(String toEntity, MemorySegment record, long offset, int length,
                                PositionReading positions) {
        PeerMailbox peer = peers.get(toEntity);
        positions.list(peer.sent); // before the record can be handled: a reader then finds its entry
        int n = entityAscii.length;
        int messageLength = 1 + n + 2 + length;
        AtomicBuffer ring = peer.ring.buffer();
        int index = claim(peer, MailboxMessage.DESCRIPTORS, messageLength, peer.sent); // holds its lock once claimed
        try {
            long end;
            try {
                ring.putByte(index, (byte) n);
                ring.putBytes(index + 1, entityAscii);
                ring.putShort(index + 1 + n, (short) 1, ByteOrder.LITTLE_ENDIAN);
                int at = index + 3 + n;
                MemorySegment.copy(record, offset, peer.file.memory(), at, length);
                ring.putByte(at + DescriptorCodec.FLAGS_OFFSET, (byte) DescriptorCodec.FLAG_POSITION);
                end = endPosition(peer, index, messageLength);
            } catch (RuntimeException | Error e) {
                peer.ring.abort(index);
                throw e;
            }
            peer.sent.add(end, DescriptorCodec.uuidMsb(record, offset), DescriptorCodec.uuidLsb(record, offset));
            peer.ring.commit(index); // after the entry: the consumer cannot pass a record not committed
        } finally {
            peer.sent.unlock();
        }
        peer.doorbell.ring();
        return peer;
    }

    // Where a claimed, uncommitted message at `index` ends in the ring, as a position: the tail is past it by less
    // than the ring's size, since the reader cannot pass a record not yet committed.
    private static long endPosition(PeerMailbox peer, int index, int messageLength) {
        int capacity = peer.ring.capacity();
        long endIndex = index - HEADER_LENGTH + align(messageLength + HEADER_LENGTH, ALIGNMENT);
        long tail = peer.ring.producerPosition();
        return tail - ((tail - endIndex) & (capacity - 1));
    }

    private void flush(PeerMailbox peer, int type, Outbox out, int count) {
        MailboxMessage.finish(out.message, entityAscii.length, count);
        int length = out.message.position();
        int index = claim(peer, type, length, null);
        peer.ring.buffer().putBytes(index, out.buffer, 0, length);
        peer.ring.commit(index);
        peer.doorbell.ring();
    }

    // Claims room for a message of `length` bytes in the peer's ring, waiting while it is full; returns the index
    // to write the message at. With `sent`, each try holds its lock, and a claim made returns with it held: a
    // reader of positions only tries that lock, and is not kept out while the ring is full.
    private int claim(PeerMailbox peer, int type, int length, SentByPosition sent) {
        int index = tryClaim(peer, type, length, sent);
        if (index > 0) {
            return index; // the common case reads no clock: a clock read costs as much as the write on some VMs
        }
        long start = System.nanoTime();
        long nextCheck = start + PeerMailboxes.CHECK_INTERVAL_MS * 1_000_000L;
        while ((index = tryClaim(peer, type, length, sent)) <= 0) {
            if (closed.getAsBoolean()) {
                throw closedException.get();
            }
            long now = System.nanoTime();
            if (now - nextCheck > 0) { // a full ring whose reader died never drains
                nextCheck = now + PeerMailboxes.CHECK_INTERVAL_MS * 1_000_000L;
                if (!peer.ownerAlive()) {
                    peers.retire(peer);
                    throw peers.unavailable(peer.entity, "died with its mailbox full");
                }
            }
            if (now - start > SEND_TIMEOUT_NS) {
                throw new MstarTransportException("mailbox full: entity=" + peer.entity + " took no message for "
                    + SEND_TIMEOUT_NS / 1_000_000_000L + " s; is it polling its mailbox?");
            }
            Thread.onSpinWait();
        }
        return index;
    }

    private static int tryClaim(PeerMailbox peer, int type, int length, SentByPosition sent) {
        if (sent == null) {
            return peer.ring.tryClaim(type, length);
        }
        sent.lock();
        int index = peer.ring.tryClaim(type, length);
        if (index <= 0) {
            sent.unlock();
        }
        return index;
    }
}
