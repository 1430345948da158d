package io.mstar.transport.xbench;

import io.aeron.Aeron;
import io.aeron.FragmentAssembler;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.logbuffer.FragmentHandler;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Aeron IPC as Aeron's samples run it: the consumer's JVM embeds the media driver ({@code ThreadingMode.SHARED},
 * as suits two cores); the driver and every loop of the producer and the consumer idle with Aeron's own default
 * backoff ({@code BackoffIdleStrategy(100, 10, 1 us, 100 us)}). Over IPC the driver's conductor moves each
 * publication's limit from its subscribers' positions, so a driver that sleeps throttles the publisher: the
 * sleeping driver this peer once ran (1 ms) measured the sleep, not Aeron. The consumer polls up to 16 fragments
 * at a time; payloads go on one IPC stream (term length 128 MiB, so a 16 MiB payload is one message) through an
 * exclusive publication, 16-byte ACKs come back on another (term length 64 KiB).
 * Switches: {@code -Dxbench.aeronIdle=aeron|park|backoff|yield|spin}, {@code -Dxbench.aeronDriverIdle=aeron|sleep}
 * (sleep: the old 1 ms driver, for comparison), {@code -Dxbench.aeronThreading=SHARED|DEDICATED},
 * {@code -Dxbench.aeronFragments=N}. The producer fills its own buffer and
 * {@code offer}s it (one copy into the log, as the arena's send path copies into a slot); the consumer
 * reads the payload in place (or as Aeron reassembled it) and checks every byte. The producer polls its ACKs
 * in its own duty cycle, as Aeron's users do.
 */
final class AeronPeer {
    // -Dxbench.aeronData=CHANNEL tries another data channel (e.g. a smaller term, or sparse=false).
    private static final String DATA = System.getProperty("xbench.aeronData", "aeron:ipc?term-length=128m");
    private static final String ACKS = "aeron:ipc?term-length=64k";
    private static final int ACK_BYTES = 16; // a uuid, as the library's ACK
    private static final int DATA_STREAM = 1001;
    private static final int ACK_STREAM = 1002;

    private AeronPeer() {
    }

    // The embedded driver's: Aeron's default backoff, as its samples run it (never a sleeping driver).
    private static IdleStrategy driverIdle() {
        return System.getProperty("xbench.aeronDriverIdle", "aeron").equals("sleep")
            ? new org.agrona.concurrent.SleepingMillisIdleStrategy(1) : new BackoffIdleStrategy(100, 10, 1_000, 100_000);
    }

    static IdleStrategy idle() {
        return switch (System.getProperty("xbench.aeronIdle", "aeron")) {
            case "spin" -> new org.agrona.concurrent.BusySpinIdleStrategy();
            case "yield" -> new org.agrona.concurrent.YieldingIdleStrategy();
            case "aeron" -> new BackoffIdleStrategy(100, 10, 1_000, 100_000); // Aeron's own default backoff
            case "park" -> new BackoffIdleStrategy(100, 0, 1_000, 100_000); // no yields: parks leave a busy core at once
            default -> new BackoffIdleStrategy(16, 8, 1_000, 100_000);
        };
    }

    private static String aeronDir(String dir) {
        return Path.of(dir, "aeron").toString();
    }

    /** The media driver as both the pair and the scale benchmark run it (switches above). */
    static MediaDriver.Context driverContext(String aeronDir) {
        return new MediaDriver.Context()
            .aeronDirectoryName(aeronDir)
            .dirDeleteOnStart(true)
            .dirDeleteOnShutdown(true)
            .threadingMode(ThreadingMode.valueOf(System.getProperty("xbench.aeronThreading", "SHARED")))
            .sharedIdleStrategy(driverIdle())
            .conductorIdleStrategy(driverIdle())
            .senderIdleStrategy(driverIdle())
            .receiverIdleStrategy(driverIdle())
            .sharedNetworkIdleStrategy(driverIdle());
    }

    static void consumer(String dir) {
        Protocol.Verifier verifier = new Protocol.Verifier();
        AtomicBoolean done = new AtomicBoolean();
        try (MediaDriver driver = MediaDriver.launchEmbedded(driverContext(aeronDir(dir)));
             Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(driver.aeronDirectoryName()));
             Subscription data = aeron.addSubscription(DATA, DATA_STREAM);
             Publication acks = aeron.addExclusivePublication(ACKS, ACK_STREAM)) {
            System.out.println("READY");
            UnsafeBuffer ack = new UnsafeBuffer(new byte[ACK_BYTES]);
            IdleStrategy idle = idle();
            FragmentHandler handler = new FragmentAssembler((buffer, offset, length, header) -> {
                if (length == 1) {
                    done.set(true);
                } else {
                    verifier.check(segment(buffer, offset, length));
                }
                while (acks.offer(ack, 0, ACK_BYTES) < 0) {
                    idle.idle();
                }
                idle.reset();
            });
            IdleStrategy pollIdle = idle();
            int fragments = Integer.getInteger("xbench.aeronFragments", 16);
            while (!done.get()) {
                pollIdle.idle(data.poll(handler, fragments));
            }
            // The driver outlives the producer's client: a client whose driver is gone exits its JVM.
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (data.imageCount() > 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
                pollIdle.idle();
            }
        }
        System.out.println(verifier.summary());
    }

    // The bytes in place: in the term (native) or, for a reassembled message, the assembler's buffer.
    static MemorySegment segment(DirectBuffer buffer, int offset, int length) {
        byte[] array = buffer.byteArray();
        return array != null
            ? MemorySegment.ofArray(array).asSlice(buffer.wrapAdjustment() + offset, length)
            : MemorySegment.ofAddress(buffer.addressOffset() + offset).reinterpret(length);
    }

    static void producer(String dir, double seconds) throws Exception {
        try (Aeron aeron = Aeron.connect(new Aeron.Context().aeronDirectoryName(aeronDir(dir)));
             Publication data = aeron.addExclusivePublication(DATA, DATA_STREAM);
             Subscription acks = aeron.addSubscription(ACKS, ACK_STREAM);
             Arena arena = Arena.ofShared()) {
            while (!data.isConnected() || !acks.isConnected()) {
                Thread.sleep(1);
            }
            MemorySegment source = arena.allocate(Protocol.SIZES[Protocol.SIZES.length - 1], 4096);
            UnsafeBuffer buffer = new UnsafeBuffer(source.address(), (int) source.byteSize());
            IdleStrategy idle = new BackoffIdleStrategy(100, 10, 1_000, 100_000);
            Producer[] loop = new Producer[1];
            FragmentHandler onAck = (b, o, l, h) -> loop[0].acked();
            // As Aeron's users write it: the ACKs are polled in the producer's own duty cycle, no thread of their own.
            loop[0] = new Producer() {
                @Override
                void send(long seq, long size) {
                    Protocol.fill(source.asSlice(0, size), seq);
                    while (data.offer(buffer, 0, (int) size) < 0) {
                        acks.poll(onAck, 64);
                        idle.idle();
                    }
                    idle.reset();
                }

                @Override
                void takeOutcomes() {
                    acks.poll(onAck, 64);
                }

                @Override
                boolean pollsItsOutcomes() {
                    return true;
                }
            };
            loop[0].run(seconds);
            UnsafeBuffer end = new UnsafeBuffer(new byte[1]);
            while (data.offer(end, 0, 1) < 0) {
                idle.idle();
            }
            long deadline = System.nanoTime() + 200_000_000L; // the end marker's ACK
            while (System.nanoTime() < deadline) {
                acks.poll(onAck, 64);
                idle.idle();
            }
        }
    }
}
