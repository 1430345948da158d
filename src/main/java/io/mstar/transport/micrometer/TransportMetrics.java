package io.mstar.transport.micrometer;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.TimeGauge;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.mstar.transport.Deployment;
import io.mstar.transport.LatencyStats;
import io.mstar.transport.RemoteStats;
import io.mstar.transport.TensorEndpoint;
import io.mstar.transport.TensorTransport;
import io.mstar.transport.TransportStats;

import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;
import java.util.function.ToLongFunction;

/**
 * A transport's stats as Micrometer meters, tagged {@code entity} and {@code transport} (arena or file):
 * counters {@code mstar.transport.tensors.sent}, {@code .bytes.sent}, {@code .spills}, {@code .acks},
 * {@code .acks.unknown}, {@code .reclaims.ttl}, {@code .reclaims.dead.consumer}, {@code .tensors.received};
 * gauges {@code mstar.transport.in.flight}, {@code .arena.used}, {@code .arena.capacity},
 * {@code .arena.fragmentation}, {@code .peer.segments.mapped}, the time gauge {@code .in.flight.oldest} (how
 * long the tensor in flight longest has waited for its ACK); for an endpoint, the gauges
 * {@code mstar.mailbox.unread.messages} and {@code mstar.mailbox.unread.acks} (what waits unread in its
 * mailbox: ACKs that stay there while tensors wait mean no thread reads it); the timer {@code mstar.transport.send.to.ack}
 * (count and total) with its percentiles as time gauges {@code mstar.transport.send.to.ack.percentile}
 * (tag {@code phi}: 0.5, 0.99, 0.999, 1 for the max), and the same for {@code receive.to.release}.
 * One stats snapshot serves every meter for 100 ms, so a scrape takes one. An endpoint on the cross-node
 * path adds {@code mstar.remote.*}: counters {@code tensors.sent}, {@code bytes.sent}, {@code landed},
 * {@code timed.out}, {@code refused.there}, {@code tensors.received}, {@code bytes.received},
 * {@code aborted}, {@code refused.here}, {@code rejected.connections}, {@code protocol.errors}, and the
 * gauge {@code connections}.
 *
 * <p>Micrometer holds a meter's state object weakly: the state is the transport (which its owner holds while
 * it runs), and the functions hold this binder, so {@code new TransportMetrics(endpoint).bindTo(registry)}
 * keeps working after the binder itself is dropped.
 */
public final class TransportMetrics implements MeterBinder {
    // A scrape reads every meter within milliseconds: they share one snapshot, and the next scrape takes a new one.
    private static final long SNAPSHOT_REUSE_NS = 100_000_000L;

    private final TensorTransport transport;
    private final String entity;
    private final Supplier<Optional<RemoteStats>> remote; // empty without the cross-node path
    private final Supplier<Optional<TensorEndpoint.MailboxStats>> mailbox; // empty for a transport without endpoint
    private volatile TransportStats cached;
    private volatile long cachedAtNs;

    /** The meters of an endpoint's transport, tagged with the endpoint's entity. */
    public TransportMetrics(TensorEndpoint endpoint) {
        this(endpoint.transport(), endpoint.deployment(), endpoint::remoteStats,
            () -> Optional.of(endpoint.stats().mailbox()));
    }

    /** The meters of a transport built for {@code deployment} (for a transport used without an endpoint). */
    public TransportMetrics(TensorTransport transport, Deployment deployment) {
        this(transport, deployment, Optional::empty, Optional::empty);
    }

    private TransportMetrics(TensorTransport transport, Deployment deployment, Supplier<Optional<RemoteStats>> remote,
                             Supplier<Optional<TensorEndpoint.MailboxStats>> mailbox) {
        this.transport = transport;
        this.entity = deployment.entity();
        this.remote = remote;
        this.mailbox = mailbox;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        // Not through the cache: a snapshot taken at binding would answer the first scrape with its zeros.
        Tags tags = Tags.of("entity", entity, "transport", transport.statsSummary().transport());
        counter(registry, tags, "tensors.sent", null, TransportStats::tensorsSent);
        counter(registry, tags, "bytes.sent", "bytes", TransportStats::bytesSent);
        counter(registry, tags, "spills", null, TransportStats::spills);
        counter(registry, tags, "acks", null, TransportStats::acks);
        counter(registry, tags, "refusals", null, TransportStats::refusals);
        counter(registry, tags, "acks.unknown", null, TransportStats::unknownAcks);
        counter(registry, tags, "reclaims.ttl", null, TransportStats::ttlReclaims);
        counter(registry, tags, "reclaims.dead.consumer", null, TransportStats::deadConsumerReclaims);
        counter(registry, tags, "tensors.received", null, TransportStats::tensorsReceived);
        counter(registry, tags, "reads.stale", null, TransportStats::staleReads);
        gauge(registry, tags, "in.flight", null, TransportStats::inFlight);
        TimeGauge.builder("mstar.transport.in.flight.oldest", transport, TimeUnit.NANOSECONDS,
            t -> stats().oldestInFlightNs()).tags(tags).register(registry);
        if (mailbox.get().isPresent()) {
            Gauge.builder("mstar.mailbox.unread.messages", transport,
                t -> mailbox.get().map(TensorEndpoint.MailboxStats::unreadMessages).orElse(0L)).tags(tags).register(registry);
            Gauge.builder("mstar.mailbox.unread.acks", transport,
                t -> mailbox.get().map(TensorEndpoint.MailboxStats::unreadAcks).orElse(0L)).tags(tags).register(registry);
        }
        gauge(registry, tags, "arena.used", "bytes", s -> s.arena() == null ? 0 : s.arena().usedBytes());
        gauge(registry, tags, "arena.capacity", "bytes", s -> s.arena() == null ? 0 : s.arena().capacityBytes());
        gauge(registry, tags, "arena.fragmentation", null, s -> s.arena() == null ? 0 : s.arena().fragmentation());
        gauge(registry, tags, "peer.segments.mapped", null, TransportStats::mappedPeerSegments);
        latency(registry, tags, "send.to.ack", TransportStats::sendToAck);
        latency(registry, tags, "receive.to.release", TransportStats::receiveToRelease);
        if (remote.get().isPresent()) {
            remoteCounter(registry, tags, "tensors.sent", null, RemoteStats::tensorsSent);
            remoteCounter(registry, tags, "bytes.sent", "bytes", RemoteStats::bytesSent);
            remoteCounter(registry, tags, "landed", null, RemoteStats::landed);
            remoteCounter(registry, tags, "timed.out", null, RemoteStats::timedOut);
            remoteCounter(registry, tags, "in.doubt", null, RemoteStats::inDoubt);
            remoteCounter(registry, tags, "refused.there", null, RemoteStats::refusedThere);
            remoteCounter(registry, tags, "tensors.received", null, RemoteStats::tensorsReceived);
            remoteCounter(registry, tags, "bytes.received", "bytes", RemoteStats::bytesReceived);
            remoteCounter(registry, tags, "aborted", null, RemoteStats::aborted);
            remoteCounter(registry, tags, "refused.here", null, RemoteStats::refusedHere);
            remoteCounter(registry, tags, "duplicates", null, RemoteStats::duplicates);
            remoteCounter(registry, tags, "rejected.connections", null, RemoteStats::rejectedConnections);
            remoteCounter(registry, tags, "protocol.errors", null, RemoteStats::protocolErrors);
            Gauge.builder("mstar.remote.connections", transport, t -> remote.get().map(RemoteStats::connections)
                .orElse(0L)).tags(tags).register(registry);
        }
    }

    private void remoteCounter(MeterRegistry registry, Tags tags, String name, String unit,
                               ToLongFunction<RemoteStats> value) {
        FunctionCounter.builder("mstar.remote." + name, transport, t -> remote.get().map(value::applyAsLong).orElse(0L))
            .tags(tags).baseUnit(unit).register(registry);
    }

    private void counter(MeterRegistry registry, Tags tags, String name, String unit, ToLongFunction<TransportStats> value) {
        FunctionCounter.builder("mstar.transport." + name, transport, t -> value.applyAsLong(stats()))
            .tags(tags).baseUnit(unit).register(registry);
    }

    private void gauge(MeterRegistry registry, Tags tags, String name, String unit, ToDoubleFunction<TransportStats> value) {
        Gauge.builder("mstar.transport." + name, transport, t -> value.applyAsDouble(stats()))
            .tags(tags).baseUnit(unit).register(registry);
    }

    private void latency(MeterRegistry registry, Tags tags, String name, Function<TransportStats, LatencyStats> of) {
        FunctionTimer.builder("mstar.transport." + name, transport, t -> of.apply(stats()).count(),
            t -> of.apply(stats()).totalNs(), TimeUnit.NANOSECONDS).tags(tags).register(registry);
        percentile(registry, tags, name, "0.5", s -> of.apply(s).p50Ns());
        percentile(registry, tags, name, "0.99", s -> of.apply(s).p99Ns());
        percentile(registry, tags, name, "0.999", s -> of.apply(s).p999Ns());
        percentile(registry, tags, name, "1", s -> of.apply(s).maxNs());
    }

    private void percentile(MeterRegistry registry, Tags tags, String name, String phi, ToLongFunction<TransportStats> ns) {
        TimeGauge.builder("mstar.transport." + name + ".percentile", transport, TimeUnit.NANOSECONDS,
            t -> ns.applyAsLong(stats())).tags(tags.and("phi", phi)).register(registry);
    }

    private TransportStats stats() {
        long now = System.nanoTime();
        TransportStats stats = cached;
        if (stats == null || now - cachedAtNs > SNAPSHOT_REUSE_NS) {
            stats = transport.statsSummary();
            cached = stats;
            cachedAtNs = now;
        }
        return stats;
    }
}
