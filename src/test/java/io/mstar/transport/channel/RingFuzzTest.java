package io.mstar.transport.channel;

import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorDescriptor;
import io.mstar.transport.naming.Namespace;
import io.mstar.transport.naming.ShmNames;
import io.mstar.transport.shm.MappedSegment;
import io.mstar.transport.testing.ChildJvm;
import io.mstar.transport.testing.ShmTestDir;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A writer of this user that puts garbage into a mailbox's ring between good records: every good record
 * is delivered, in order, and no poll throws; also with Agrona's bounds checks off (a child JVM, since
 * Agrona reads that switch once per JVM).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
@Tag("long")
class RingFuzzTest {
    private static final int RECORDS = 100_000;

    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    @Test
    void garbageBetweenGoodRecordsIsSkippedAndEveryGoodRecordDelivered() {
        long seed = Long.getLong("fuzz.seed", System.nanoTime()); // -Dfuzz.seed=N replays a run
        String result = fuzz(shm.path(), seed, RECORDS);
        System.out.println("RESULT " + result);
        assertTrue(result.startsWith("ok"), result);
    }

    @Test
    void theSameWithAgronasBoundsChecksOff() throws Exception {
        long seed = Long.getLong("fuzz.seed", System.nanoTime()); // -Dfuzz.seed=N replays a run
        ChildJvm child = ChildJvm.start(true, List.of("-Dagrona.disable.bounds.checks=true"), java.util.Map.of(),
            RingFuzzTest.class, shm.path().toString(), Long.toString(seed), Integer.toString(RECORDS));
        int exit;
        try {
            exit = child.await(100);
        } catch (AssertionError timedOut) {
            throw new AssertionError("seed=" + seed + ": " + timedOut.getMessage(), timedOut);
        }
        String output = child.output();
        assertEquals(0, exit, "seed=" + seed + "\n" + output);
        assertTrue(output.contains("RESULT ok"), output);
        child.deleteLog();
    }

    /** The fuzz in a JVM of its own: directory, seed, records. */
    public static void main(String[] args) {
        String result = fuzz(Path.of(args[0]), Long.parseLong(args[1]), Integer.parseInt(args[2]));
        System.out.println("RESULT " + result);
        System.exit(result.startsWith("ok") ? 0 : 1);
    }

    // Writes `records` records, a third of them garbage of every kind, polling as it goes; "ok ..." or what failed.
    static String fuzz(Path dir, long seed, int records) {
        SplittableRandom random = new SplittableRandom(seed);
        Namespace ns = Namespace.of(null, "fuzz");
        List<UUID> expected = new ArrayList<>();
        List<UUID> delivered = new ArrayList<>();
        TensorChannel.Listener listener = new TensorChannel.Listener() {
            @Override
            public void descriptors(String from, List<TensorDescriptor> batch) {
            }

            @Override
            public void acks(String from, List<UUID> uuids) {
                delivered.addAll(uuids);
            }
        };
        int garbage = 0;
        try (ShmMailbox mailbox = ShmMailbox.open(ShmTestDir.deployment(dir, "fuzz", "rx"));
             MappedSegment file = MappedSegment.openPeer(dir, ShmNames.mailbox(ns, "rx"), MailboxDescriptor.FILE_BYTES,
                 true)) {
            ManyToOneRingBuffer ring = PeerMailbox.ring(file);
            for (int i = 0; i < records; i++) {
                boolean written;
                if (i == records / 3 || i == 2 * records / 3) { // twice a run: each holds the ring for the bound
                    written = writeStuck(ring, random, i == records / 3);
                    garbage += written ? 1 : 0;
                } else if (random.nextInt(3) == 0) {
                    written = writeGarbage(ring, random);
                    garbage += written ? 1 : 0;
                } else {
                    UUID uuid = new UUID(seed, i);
                    written = writeGood(ring, uuid);
                    if (written) {
                        expected.add(uuid);
                    }
                }
                if (!written || random.nextInt(16) == 0) {
                    while (mailbox.poll(listener, 1 + random.nextInt(64)) > 0) {
                        // drain what is there
                    }
                    if (!written) {
                        i--; // the ring was full: the same step again
                    }
                }
            }
            for (int idle = 0; idle < 3; ) {
                idle = mailbox.poll(listener, 64) == 0 ? idle + 1 : 0;
            }
            if (!expected.equals(delivered)) {
                return "FAILED seed=" + seed + ": expected " + expected.size() + " good records, delivered "
                    + delivered.size() + (delivered.size() == expected.size() ? " out of order" : "");
            }
            if (garbage > 0 && mailbox.garbageRecords() + mailbox.badMessages() == 0) {
                return "FAILED seed=" + seed + ": " + garbage + " garbage records, none counted";
            }
            return "ok seed=" + seed + " good=" + delivered.size() + " garbage=" + garbage + " skipped="
                + mailbox.garbageRecords() + " refused=" + mailbox.badMessages();
        } catch (RuntimeException | AssertionError e) {
            return "FAILED seed=" + seed + ": " + e;
        }
    }

    private static boolean writeGood(ManyToOneRingBuffer ring, UUID uuid) {
        ByteBuffer message = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
        byte[] sender = "tx".getBytes(StandardCharsets.US_ASCII);
        MailboxMessage.start(message, sender);
        message.putLong(uuid.getMostSignificantBits()).putLong(uuid.getLeastSignificantBits());
        MailboxMessage.finish(message, sender.length, 1);
        return ring.write(MailboxMessage.ACKS, new org.agrona.concurrent.UnsafeBuffer(message), 0, message.position());
    }

    // Claims room as a writer would, fills it with random bytes and publishes a header of one kind of garbage.
    private static boolean writeGarbage(ManyToOneRingBuffer ring, SplittableRandom random) {
        int length = 8 + random.nextInt(2048);
        int kind = random.nextInt(8);
        int type = kind == 0 ? 77 + random.nextInt(1000) : random.nextBoolean() ? MailboxMessage.ACKS : MailboxMessage.DESCRIPTORS;
        int index = ring.tryClaim(type, length);
        if (index < 0) {
            return false;
        }
        AtomicBuffer buffer = ring.buffer();
        int payloadRoom = ((length + 8 + 7) & -8) - 8; // the claim spans whole 8-byte steps
        boolean zeros = kind >= 6; // a zero-filled record: the resync must not take its body for claims
        for (int k = 0; k < payloadRoom; k += 4) {
            int word = zeros ? 0 : random.nextInt();
            // A zero word, or a negative one that a claim in progress could have, reads as a claim not yet
            // written (the reader waits on it, as for a slow writer); a small positive one reads as a record
            // that fits, and one of an unknown type is skipped by its length, taking the good records after it
            // along (a writer of this user may forge that: it is trusted with the bytes). Garbage words are none
            // of these: their magnitude is past twice the ring.
            long bound = 2L * ring.capacity();
            if (!zeros && Math.abs((long) word) <= bound) {
                word = (int) (word < 0 ? word - bound - 1 : word + bound + 1);
            }
            buffer.putInt(index + k, word);
        }
        int header = index - 8;
        switch (kind) {
            case 0, 1 -> ring.commit(index); // an unknown type, or a payload that is no message
            case 2, 6 -> { // longer than the ring or what was claimed
                buffer.putInt(header, -(ring.capacity() + random.nextInt(1 << 20)));
                ring.commit(index);
            }
            case 3, 7 -> { // shorter than a header
                buffer.putInt(header, -(1 + random.nextInt(7)));
                ring.commit(index);
            }
            case 4 -> { // shorter than claimed: the rest of the claim is read as a record of garbage
                buffer.putInt(header, -(8 + random.nextInt(length / 2 + 1)));
                ring.commit(index);
            }
            default -> buffer.putIntRelease(header, -(ring.capacity() + 8 + random.nextInt(1 << 20))); // negative
        }
        return true;
    }

    /**
     * A record that reads as a claim not yet committed, though its writer lives: a zero length committed over
     * a zero-filled body ({@code zeroLength}), or a claim never committed. The ring waits on it for the bound
     * ({@code ShmMailbox.STUCK_CLAIM_MS}), then skips it.
     */
    static boolean writeStuck(ManyToOneRingBuffer ring, SplittableRandom random, boolean zeroLength) {
        int length = 8 + random.nextInt(512);
        int index = ring.tryClaim(MailboxMessage.ACKS, length);
        if (index < 0) {
            return false;
        }
        if (zeroLength) {
            ring.buffer().setMemory(index, length, (byte) 0);
            ring.buffer().putIntRelease(index - 8, 0);
        } else {
            for (int k = 0; k + 4 <= length; k += 4) {
                ring.buffer().putInt(index + k, 1 + random.nextInt(Integer.MAX_VALUE - 1));
            }
        }
        return true;
    }
}
