package io.mstar.transport.xbench;

import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

/**
 * Aeron IPC in the scale benchmark's shapes, beside {@link ScalePeer} in the same run: one media driver for the
 * node (the launcher's, configured as {@link AeronPeer#driverContext} says), each consumer subscribes to a data
 * stream of its own; N producers into one consumer offer into that stream's one log (Aeron's concurrent
 * publication: its N writers race on the log's tail, as ours race on the mailbox's), one producer to M consumers
 * offers to their streams in turn. Each payload's 8-byte ACK goes back on its producer's own stream; a producer
 * polls its ACKs in its duty cycle, at most a window in flight, and its loops idle with Aeron's default backoff.
 */
final class ScaleAeronPeer {
    private static final String DATA = "aeron:ipc?term-length=64m"; // a 1 MiB payload is one message
    private static final String ACKS = "aeron:ipc";

    private ScaleAeronPeer() {
    }

    // Streams of their own in each cell: an earlier cell's publications may still linger in the driver.
    private static int dataStream(int cell, int consumer) {
        return 100_000 + cell * 1000 + consumer;
    }

    private static int ackStream(int cell, int producer) {
        return 100_000 + cell * 1000 + 500 + producer;
    }

    private static Aeron connect(String aeronDir) {
        return Aeron.connect(new Aeron.Context().aeronDirectoryName(aeronDir));
    }

    /** {@code aeron consumer INDEX}: as {@link ScalePeer#consumer}, over Aeron. */
    static void consumer(int cell, int index, String aeronDir, long size) {
        ScaleWindows.Check check = new ScaleWindows.Check(size);
        Map<Integer, Publication> acksTo = new HashMap<>(); // by producer
        UnsafeBuffer ack = new UnsafeBuffer(new byte[8]);
        IdleStrategy idle = AeronPeer.idle();
        try (Aeron aeron = connect(aeronDir); Subscription data = aeron.addSubscription(DATA, dataStream(cell, index))) {
            FragmentHandler handler = new FragmentAssembler((buffer, offset, length, header) -> {
                long head = check.check(AeronPeer.segment(buffer, offset, length).asByteBuffer());
                int producer = (int) (head >>> 40);
                Publication acks = acksTo.computeIfAbsent(producer, p -> aeron.addPublication(ACKS, ackStream(cell, p)));
                ack.putLong(0, head & 0xFF_FFFF_FFFFL);
                while (acks.offer(ack, 0, 8) < 0) {
                    idle.idle();
                }
                idle.reset();
            });
            System.out.println("READY");
            Thread stop = ScalePeer.untilInputEnds();
            IdleStrategy pollIdle = AeronPeer.idle();
            while (stop.isAlive()) {
                pollIdle.idle(data.poll(handler, 64));
            }
        }
        System.out.println(check.result());
    }

    /** {@code aeron producer ID}: as {@link ScalePeer#producer}, over Aeron. */
    static void producer(int cell, int id, String aeronDir, long size, int consumers, int window, ScaleWindows windows)
        throws InterruptedException {
        long[] sentAt = new long[2 * window];
        int[] inFlight = {0};
        try (Aeron aeron = connect(aeronDir); Subscription acks = aeron.addSubscription(ACKS, ackStream(cell, id));
             Arena arena = Arena.ofConfined()) {
            Publication[] data = new Publication[consumers];
            for (int c = 0; c < consumers; c++) {
                data[c] = aeron.addPublication(DATA, dataStream(cell, c));
            }
            for (Publication p : data) {
                while (!p.isConnected()) {
                    Thread.sleep(1);
                }
            }
            MemorySegment payload = arena.allocate(size, 4096);
            UnsafeBuffer buffer = new UnsafeBuffer(payload.address(), (int) size);
            FragmentHandler onAck = (b, o, l, h) -> {
                windows.record(System.nanoTime() - sentAt[(int) (b.getLong(o) % sentAt.length)]);
                inFlight[0]--;
            };
            IdleStrategy idle = AeronPeer.idle();
            System.out.println("READY");
            windows.awaitGo();
            for (long seq = 0; windows.goOn(seq); seq++) {
                while (inFlight[0] >= window) {
                    idle.idle(acks.poll(onAck, 64));
                }
                idle.reset();
                ScaleWindows.fill(payload, id, seq);
                sentAt[(int) (seq % sentAt.length)] = System.nanoTime();
                Publication to = data[(int) (seq % consumers)];
                for (long r = to.offer(buffer, 0, (int) size); r < 0; r = to.offer(buffer, 0, (int) size)) {
                    if (r == Publication.CLOSED || r == Publication.MAX_POSITION_EXCEEDED) {
                        throw new IllegalStateException("Aeron publication refused for good: " + r);
                    }
                    acks.poll(onAck, 64);
                    idle.idle();
                }
                idle.reset();
                inFlight[0]++;
                acks.poll(onAck, 64);
            }
            while (inFlight[0] > 0) { // every ACK, before the client closes
                idle.idle(acks.poll(onAck, 64));
            }
        }
    }
}
