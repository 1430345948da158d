package io.mstar.transport.endpoint;

import io.mstar.transport.DType;
import io.mstar.transport.Deployment;
import io.mstar.transport.Tensor;
import io.mstar.transport.TensorChannel;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TensorTransports;
import io.mstar.transport.TransportConfig;
import io.mstar.transport.TransportStats;
import io.mstar.transport.codec.DescriptorCodec;
import io.mstar.transport.metrics.StatsJson;
import io.mstar.transport.testing.ShmTestDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A producer whose ACKs nobody reads (a transport and a mailbox used without an endpoint, never polled) while
 * its consumer lives: the operator sees the stall in the stats (the oldest tensor's wait, the ACKs unread in the
 * mailbox, in the published stats file too) and in one WARN.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class StallVisibilityTest {
    @RegisterExtension
    final ShmTestDir shm = new ShmTestDir();

    private Deployment deployment(String entity) {
        Map<String, String> env = Map.of(TransportConfig.SHM_DIR, shm.path().toString(), TransportConfig.ARENA, "1",
            TransportConfig.SEGMENT_MB, "4", TransportConfig.MAX_SEGMENTS, "2", TransportConfig.STALL_WARN_S, "1");
        return Deployment.of(TransportConfig.from(env::get), "stall-test", entity);
    }

    @Test
    void ackHeldUnreadShowsItsAgeTheUnreadAckAndOneWarning() throws Exception {
        PrintStream stderr = System.err;
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        System.setErr(new PrintStream(log, true, StandardCharsets.UTF_8)); // the simple logger writes here
        try (TensorTransport transport = TensorTransports.create(deployment("producer"), false);
             TensorChannel mailbox = TensorTransports.mailbox(deployment("producer"), transport);
             TensorEndpoint consumer = TensorEndpoint.open(deployment("consumer"))) {
            MemorySegment record = MemorySegment.ofArray(new byte[DescriptorCodec.MAX_RECORD_BYTES]);
            Tensor tensor = Tensor.of(DType.U8, MemorySegment.ofArray(new byte[4096]), 4096);
            mailbox.records().sendDescriptorRecord("consumer", record, 0,
                transport.records().sendInto("held", tensor, record, 0));
            assertEquals(1, consumer.receive(t -> { }, Duration.ofSeconds(10)), "the consumer handles it and ACKs");

            long deadline = System.nanoTime() + 20_000_000_000L;
            while (!log.toString(StandardCharsets.UTF_8).contains("a tensor waits for its ACK while its consumer lives")
                && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            String warnings = log.toString(StandardCharsets.UTF_8);
            assertTrue(warnings.contains("a tensor waits for its ACK while its consumer lives"), warnings);
            TransportStats stats = transport.statsSummary();
            assertEquals(1, stats.inFlight());
            assertTrue(stats.oldestInFlightNs() >= 1_000_000_000L, stats.toLogLine());
            TensorEndpoint.MailboxStats box = ((io.mstar.transport.channel.ShmMailbox) mailbox).stats();
            assertEquals(1, box.unreadMessages(), box.toString());
            assertEquals(1, box.unreadAcks(), box.toString());

            Thread.sleep(2500); // more checks, still stalled: no second warning
            String later = log.toString(StandardCharsets.UTF_8);
            assertEquals(1, later.split("a tensor waits for its ACK", -1).length - 1, later);

            // The endpoint publishes its mailbox beside its transport: an endpoint that holds an ACK unread shows it.
            assertEquals(1, ((io.mstar.transport.channel.ShmMailbox) mailbox).records().pollRecords(
                new TensorChannel.RecordListener() {
                    @Override
                    public void descriptor(String from, MemorySegment r, long offset, int length) {
                    }

                    @Override
                    public void ack(String from, long msb, long lsb) {
                        transport.records().ack(from, msb, lsb);
                    }
                }, 64));
            assertEquals(0, transport.statsSummary().inFlight());
            assertEquals(0, transport.statsSummary().oldestInFlightNs());
            assertEquals(0, ((io.mstar.transport.channel.ShmMailbox) mailbox).stats().unreadAcks());
        } finally {
            System.setErr(stderr);
        }
    }

    @Test
    void anEndpointPublishesItsMailboxBesideItsTransport() throws Exception {
        try (TensorEndpoint producer = TensorEndpoint.open(deployment("publisher"))) {
            producer.prepareToSend();
            long deadline = System.nanoTime() + 10_000_000_000L;
            String published = "";
            while (!published.contains("\"mailbox\":") && System.nanoTime() < deadline) {
                Thread.sleep(100);
                try (var files = Files.list(shm.path())) {
                    for (Path p : files.filter(p -> p.getFileName().toString().contains("_stats_")).toList()) {
                        published = Files.readString(p);
                    }
                }
            }
            assertTrue(published.contains("\"mailbox\":" + StatsJson.of(new TensorEndpoint.MailboxStats(0, 0, 0, 0, 0))),
                published);
            assertTrue(published.contains("mailbox.unreadAcks=0"), published);
        }
    }
}
