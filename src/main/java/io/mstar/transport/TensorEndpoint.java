package io.mstar.transport;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * One worker's way in: the transport and the mailbox of one entity, opened and closed together. It sends to
 * entity names and tells the producer what became of each tensor ({@link Delivery}, {@link DeliveryListener});
 * it hands received tensors to a {@link TensorHandler} in place and ACKs them when the handler returns; and it
 * carries the ACKs that come back to its transport itself, so no application code sits between them.
 *
 * <h2>Who reads the mailbox</h2>
 * One thread at a time reads this entity's mailbox, and only for the moment it takes what waits: a thread in
 * {@link #poll} or {@link #receive}, a thread in {@link Delivery#await}, or, when no thread of the application has
 * polled for a millisecond, a sending thread right after it sent a tensor under 64 KiB (taking the ACKs already
 * there) and the endpoint's own ACK thread (started by the first send). ACKs go to the transport as they are read;
 * tensors are copied out of the ring (a descriptor's record, not its bytes) and handed to the handlers after the
 * mailbox is let go, one poll's handlers at a time, in order. So a handler may run, or block, as long as it likes:
 * the ACKs of this process's own tensors are still read and their outcomes told. A tensor that arrives while no
 * handler reads is kept, in order, for the next {@code poll} or {@code receive}.
 *
 * <h2>Outcomes</h2>
 * Exactly one per tensor sent, or an exception from the send and none: a send that throws leaves nothing in
 * flight. The listener is told one outcome at a time, in the order decided, never re-entrantly
 * ({@link DeliveryListener}).
 *
 * <h2>The fast path</h2>
 * {@link #post(String, String, Tensor)} and {@link #post(String, TensorClaim)} send one tensor as its
 * descriptor's record and tell its outcome to the listener only: with a handler that reads
 * {@link IncomingTensor}'s fields in place, a round trip allocates nothing in steady state on the arena.
 *
 * <p>A receive-only endpoint makes no arena segment: the first send or claim makes it, or
 * {@link #prepareToSend()} ahead of time. Thread-safe: several threads may send; reads take turns.
 */
public interface TensorEndpoint extends AutoCloseable {
    /**
     * Opens this entity's endpoint: its transport ({@code MSTAR_SHM_ARENA} picks it) and its mailbox.
     *
     * @throws io.mstar.transport.exceptions.EntityInUseException   when a live process already runs as this entity
     * @throws io.mstar.transport.exceptions.ConfigurationException when the configuration or a JVM flag is wrong
     */
    static TensorEndpoint open(Deployment deployment) {
        return open(deployment, null);
    }

    /** As {@link #open(Deployment)}, telling {@code listener} what became of every tensor this endpoint sends. */
    static TensorEndpoint open(Deployment deployment, DeliveryListener listener) {
        return TensorTransports.assembly().endpoint(deployment, listener);
    }

    Deployment deployment();

    /**
     * Waits until {@code entity} runs and can receive, or the timeout passes; returns whether it runs.
     *
     * @throws io.mstar.transport.exceptions.PeerRejectedException when {@code entity} is on another node and
     *                                  its node refused this node's connection in the handshake (another
     *                                  secret, a map that places this entity elsewhere, TLS on one side only):
     *                                  at once, not after the timeout
     */
    boolean awaitPeer(String entity, Duration timeout) throws InterruptedException;

    /**
     * Sends the tensors of one request to {@code to} (one copy each into shared memory) and returns what
     * became of them. A consumer that does not run makes the delivery {@link Delivery.Failure#REFUSED} at once,
     * its tensors freed; nothing is thrown for it.
     *
     * @throws io.mstar.transport.exceptions.CapacityException when there is no room even to spill (nothing
     *                                                         stays reserved)
     */
    Delivery send(String to, String requestId, Tensor... tensors);

    /**
     * Sends one request's tensors to several consumers (fan-out): each tensor's space is freed once every one
     * of them has ACKed it; the delivery fails if one of them dies or does not run.
     *
     * @param to 1 to 64 distinct entities
     */
    Delivery send(List<String> to, String requestId, Tensor... tensors);

    /**
     * Sends one tensor to {@code to} and tells its outcome to the listener only: the fast path, which
     * allocates nothing on the arena in steady state.
     *
     * @return the low half of the tensor's uuid, which the listener's outcome carries ({@code uuidLsb}): the
     *         caller's key to match an outcome to what it sent, with no string per tensor
     */
    long post(String to, String requestId, Tensor tensor);

    /**
     * The fast path written in place: room for one tensor of {@code dtype} and {@code shape} is claimed,
     * {@code writer} fills it (exactly the tensor's bytes, during the call), and it is sent to {@code to} as
     * {@link #post(String, String, Tensor)} sends; its outcome goes to the listener. No claim object: on the
     * arena nothing is allocated ({@code shape} is read, not kept: reuse one array). A writer that throws frees
     * the room and nothing is sent.
     *
     * @return the low half of the tensor's uuid, which the listener's outcome carries
     */
    long post(String to, String requestId, DType dtype, long[] shape, TensorRecords.Writer writer);

    /**
     * Sends again a tensor whose outcome was {@link Delivery.Failure#IN_DOUBT} (or any other failure), as a repeat
     * of its first send: a consumer's node remembers the tensors that landed from this entity for six
     * {@code MSTAR_REMOTE_TIMEOUT_S} (up to a million of them), and hands this one over only if the first did not
     * land; if it did, this one is confirmed without reaching the handler again. A producer that reposts each
     * in-doubt tensor until it is delivered has it handed over once (unless the consumer's process restarted in
     * between, which forgets what landed). To a consumer on this node, whose outcomes are never in doubt, it sends
     * as {@link #post(String, String, Tensor)} does.
     *
     * @param inDoubtMsb the high half of the uuid the failed outcome carried (the first send's, or a repost's)
     * @param inDoubtLsb its low half
     * @return the low half of this send's uuid, which its outcome carries
     */
    long repost(String to, String requestId, Tensor tensor, long inDoubtMsb, long inDoubtLsb);

    /**
     * Claims room for one tensor of {@code dtype} and {@code shape} to write in place; send it with
     * {@link #post(String, TensorClaim)}, or close it unsent to free the room (see {@link TensorClaim}).
     */
    TensorClaim claim(String requestId, DType dtype, long... shape);

    /**
     * Reads the ACKs waiting in the mailbox (when no other thread reads it now), then tells the endpoint's
     * listener up to {@code limit} outcomes that waited for this call, on this thread, oldest first; returns
     * how many it told; after {@link #close()}, what close did not tell yet, and nothing more. For a listener whose
     * {@link DeliveryListener#toldWhenPolled()} is true: a producer
     * that sends and takes its outcomes on one thread, with no queue or lock of its own.
     *
     * @throws IllegalStateException when the endpoint's listener is told as outcomes are learned (or it has none)
     */
    int pollOutcomes(int limit);

    /**
     * As {@link #pollOutcomes(int)}, waiting up to {@code timeout} for at least one outcome; returns how many
     * it told (0 when none came in time).
     */
    int awaitOutcomes(int limit, Duration timeout);

    /**
     * Publishes a claim written in place and sends it to {@code to}; its outcome goes to the listener.
     *
     * @return the low half of the tensor's uuid, as {@link TensorClaim#uuidLsb()} says and the outcome carries
     */
    long post(String to, TensorClaim claim);

    /** As {@link #post(String, TensorClaim)}, returning what became of it too. */
    Delivery send(String to, TensorClaim claim);

    /**
     * Hands up to {@code limit} waiting tensors to {@code handler}, in place, without blocking; each is ACKed
     * when the handler returns (or throws) unless it was kept. ACKs for this entity's own tensors go to its
     * transport on the way. Returns the messages read.
     *
     * @throws IllegalStateException when called from a handler, or after close
     */
    int poll(TensorHandler handler, int limit);

    /**
     * Waits until at least one message is read or the timeout passes, handing tensors to {@code handler} as
     * {@link #poll} does; returns the messages read (0 on timeout).
     */
    int receive(TensorHandler handler, Duration timeout);

    /** Makes the arena's first segment now, so that the first send does not pay for it. */
    void prepareToSend();

    /** The transport underneath: its stats, its device path, descriptors of your own. */
    TensorTransport transport();

    /** The mailbox underneath. Do not poll it yourself while the endpoint is used: the endpoint reads it. */
    TensorChannel channel();

    /**
     * A snapshot of what this endpoint has done: its transport, its mailbox and, on the cross-node path, its
     * link. The same numbers {@code mstar-shm stats} shows from another process (each arena publishes them,
     * {@value TransportConfig#STATS_PUBLISH}), the MXBean and the Micrometer binder.
     */
    Stats stats();

    /**
     * One snapshot of what an endpoint has done: its transport's ({@link TransportStats}: tensors sent and
     * received, ACKs, spills, the arena's occupancy, latencies), its mailbox's ({@link MailboxStats}), and the
     * cross-node link's ({@link RemoteStats}) when the endpoint is on that path.
     */
    record Stats(String entity, TransportStats transport, MailboxStats mailbox, Optional<RemoteStats> remote) {
    }

    /**
     * What an endpoint's mailbox refused or skipped since it opened: records of impossible length or type in
     * its ring ({@code garbageRecords}), messages that could not be decoded or whose listener threw
     * ({@code badMessages}), and records skipped because their writer died or held them past the bound
     * ({@code unblocks}), all zero in a healthy deployment; and what waits in it unread now: messages
     * ({@code unreadMessages}) and the ACKs among them ({@code unreadAcks}, refusals included). ACKs that stay
     * unread while tensors are in flight mean no thread reads the mailbox: see
     * {@link TransportStats#oldestInFlightNs()}.
     */
    record MailboxStats(long garbageRecords, long badMessages, long unblocks, long unreadMessages, long unreadAcks) {
    }

    /** The cross-node path's counters, when {@code MSTAR_REMOTE_*} is set. */
    Optional<RemoteStats> remoteStats();

    /**
     * Closes the mailbox and the transport; tensors still in flight fail with {@link Delivery.Failure#CLOSED}, told
     * to the listener on this thread, whatever its {@link DeliveryListener#toldWhenPolled()} (called from the
     * listener, they are told once it returns). A send racing close either throws or is told. Idempotent.
     */
    @Override
    void close();
}
