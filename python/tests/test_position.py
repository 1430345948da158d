"""Delivery by position (docs/format.md, section 12a) between Python endpoints: a tensor posted to one consumer goes
with the POSITION flag and is told DELIVERED when the consumer's handled position passes it, with no ACK message; a
tensor kept past its handler is told by its kept message, then its ACK, and its slot stays until the view goes; a
refused one is REFUSED, never DELIVERED, because its refusal is written before the position passes it; a mailbox of
format 1 is refused at open; and a stream of 10,000 posts is each told DELIVERED exactly once."""
import os
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mstar_transport import REFUSED, Endpoint, MailboxVersionError
from mstar_transport import format as f
from mstar_transport.arena import stamp_holds
from mstar_transport.shm import OwnedFile, PeerMailbox

DEPLOYMENT = "ipc:///tmp/mstar-python-position"


def _record_types(endpoint):
    """The type of every message the endpoint reads from its own ring, from now on."""
    types = []
    read = endpoint._message

    def recording(mtype, decoded, end):
        types.append(mtype)
        read(mtype, decoded, end)

    endpoint._message = recording
    return types


def _handled_without_ack(shm_env, producer_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=producer_env) as producer:
        types = _record_types(producer)
        lsb = producer.post("consumer", "x", np.arange(32, dtype=np.int32))
        flags = []
        assert consumer.receive(lambda t: flags.append(t.descriptor.flags), timeout=5) == 1
        outcomes = producer.await_outcomes(1, 5)
        assert [(o.uuid_lsb, o.failure) for o in outcomes] == [(lsb, None)]
        return flags, types, producer.stats, consumer.stats


def test_a_position_tensor_handled_is_delivered_with_no_ack_in_the_producers_ring(shm_env):
    flags, types, producer_stats, consumer_stats = _handled_without_ack(shm_env, shm_env)
    assert flags == [f.FLAG_POSITION]
    assert f.ACKS not in types and f.KEPT not in types, f"the producer's ring got {types}"
    assert consumer_stats["acks_sent"] == 0 and consumer_stats["kept_sent"] == 0
    assert producer_stats["by_position"] == 1 and producer_stats["acks"] == 0


def test_without_the_position_flag_the_same_exchange_puts_an_ack_in_the_producers_ring(shm_env):
    """The negative control of the test above: with POSITION off (every post ACKed by message), the ring's ACK is
    seen, so the assertion there can fail."""
    flags, types, producer_stats, consumer_stats = _handled_without_ack(
        shm_env, dict(shm_env, MSTAR_TEST_NO_POSITION="1"))
    assert flags == [0] and f.ACKS in types
    assert consumer_stats["acks_sent"] == 1 and producer_stats["by_position"] == 0


def test_a_fan_out_goes_without_the_position_flag_and_is_acked(shm_env):
    with Endpoint.open(DEPLOYMENT, "a", env=shm_env) as a, Endpoint.open(DEPLOYMENT, "b", env=shm_env) as b, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        producer.post(["a", "b"], "both", np.zeros(8, np.uint8))
        flags = []
        for consumer in (a, b):
            assert consumer.receive(lambda t: flags.append(t.descriptor.flags), timeout=5) == 1
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]
        assert flags == [0, 0] and producer.stats["acks"] == 2 and producer.stats["by_position"] == 0


def _slot_of(producer, lsb):
    [(key, state)] = [(k, v) for k, v in producer._claims.items() if k[1] == lsb]
    return key, state[0]


@pytest.mark.parametrize("how", ["slice", "keep"])
def test_a_kept_position_tensor_holds_its_slot_past_the_position_and_is_told_once(shm_env, how):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        types = _record_types(producer)
        lsb = producer.post("consumer", "kept", np.arange(64, dtype=np.int64))
        key, slot = _slot_of(producer, lsb)
        kept = []

        def handler(tensor):
            kept.append(tensor.array[8:] if how == "slice" else tensor.keep())

        assert consumer.receive(handler, timeout=5) == 1
        end = producer.in_flight[key].position
        assert consumer.mailbox.handled >= end, "the position passed the kept tensor's message"
        assert producer.await_outcomes(1, 0.5) == [], "not told while a view of it lives"
        assert producer.stats["kept"] == 1 and f.KEPT in types and f.ACKS not in types
        assert key in producer._claims and stamp_holds(slot.file.map, slot.offset, slot.nbytes, *key), \
            "its slot is neither freed nor reused while the view lives"
        view = kept.pop()
        assert int((view if how == "slice" else view.array[8:]).sum()) == sum(range(8, 64))
        if how == "keep":
            view.close()
        del view
        consumer.receive(lambda t: None, timeout=0.1)  # the view let go: its ACK now
        assert [(o.uuid_lsb, o.failure) for o in producer.await_outcomes(1, 5)] == [(lsb, None)]
        assert types.index(f.KEPT) < types.index(f.ACKS)
        assert key not in producer._claims and not stamp_holds(slot.file.map, slot.offset, slot.nbytes, *key)
        consumer.receive(lambda t: None, timeout=0.1)
        assert producer.await_outcomes(1, 0.3) == [] and producer.stats["by_position"] == 0, "told once"


def _fill(shm_env, entity, ns):
    """Fills the entity's ring to the last byte with records of an unknown type (its reader skips them)."""
    filler = PeerMailbox(shm_env["MSTAR_SHM_DIR"], ns, entity)
    try:
        for size in (100_000, 1000, 0):
            while filler.write(9, b"\0" * size, 0):
                pass
    finally:
        filler.close()


def _refused_while_the_producers_ring_is_full(shm_env, refusal_after_position=False):
    """A POSITION tensor whose stamp the consumer finds changed, while the producer's ring is full: the refusal
    cannot be written yet. Returns what the producer was told before and after the consumer could write it."""
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        if refusal_after_position:  # the refusal owed to nothing: the position may pass it before it is written
            refuse = consumer._refuse

            def refusal_not_owed(handing):
                handing.d = f.Descriptor(**{**handing.d.__dict__, "flags": 0})
                refuse(handing)

            consumer._refuse = refusal_not_owed
        lsb = producer.post("consumer", "stale", np.full(64, 3, np.uint8))
        key, slot = _slot_of(producer, lsb)
        at = f.stamp_at(slot.offset, slot.nbytes)
        slot.file.map[at:at + 16] = struct.pack("<qq", key[0], key[1] ^ 1)  # as if the slot were reused
        _fill(shm_env, "producer", producer.ns)
        assert consumer.receive(lambda t: None, timeout=0.3) == 0
        assert consumer.stats["stale_reads"] == 1
        held_back = consumer.mailbox.handled < producer.in_flight[key].position
        before = producer.poll_outcomes()  # drains the filler: room for the refusal
        consumer.receive(lambda t: None, timeout=0.3)  # writes the refusal, then passes the position
        after = producer.await_outcomes(1, 5)
        return lsb, held_back, before, after


def test_a_refused_position_tensor_is_refused_not_delivered(shm_env):
    """The refusal is written before the position passes the record: while it cannot be written (the producer's
    ring is full) the position waits, so the producer is never told DELIVERED.

    Negative control (run by hand and in the test below): with the refusal queued as owed to nothing, the position
    passed the record while the refusal still waited for room, and the producer's poll told DELIVERED (`before` held
    the outcome with failure None; the refusal that came later was counted as unknown)."""
    lsb, held_back, before, after = _refused_while_the_producers_ring_is_full(shm_env)
    assert held_back, "the position did not pass the refused record before its refusal was written"
    assert before == []
    assert [(o.uuid_lsb, o.failure) for o in after] == [(lsb, REFUSED)]


def test_a_refusal_written_after_the_position_lets_the_producer_tell_delivered(shm_env):
    """The negative control of the test above, automated: the consumer's refusal owed to nothing (as if sent after
    the position) lets the position pass first, and the producer tells the refused tensor DELIVERED."""
    lsb, held_back, before, after = _refused_while_the_producers_ring_is_full(shm_env, refusal_after_position=True)
    assert not held_back
    assert [(o.uuid_lsb, o.failure) for o in before] == [(lsb, None)] and after == []


def _record_failing_its_checks(shm_env, mangle):
    """A POSITION record that reaches the consumer's ring and fails its decoder's checks (`mangle` changes the record's
    bytes there, its length and uuid left alone), while the producer's ring is full. Returns the uuid's lsb, whether
    the position waited, and what the producer was told before and after the consumer could write to it."""
    from mstar_transport._native import ffi
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        lsb = producer.post("consumer", "bad", np.full(64, 3, np.uint8))
        key, _ = _slot_of(producer, lsb)
        ring = ffi.buffer(ffi.cast("uint8_t *", consumer.mailbox.ring), f.RING_BYTES)
        at = bytes(ring).find(struct.pack("<qq", *key)) - 16  # the record's start in the ring, not read yet
        assert at >= 0 and struct.unpack_from("<I", ring, at)[0] == f.DESCRIPTOR_MAGIC
        mangle(ring, at)
        _fill(shm_env, "producer", producer.ns)
        assert consumer.receive(lambda t: None, timeout=0.3) == 0
        assert consumer.stats["bad_descriptors"] == 1
        held_back = consumer.mailbox.handled < producer.in_flight[key].position
        before = producer.poll_outcomes()  # drains the filler: room for the refusal
        consumer.receive(lambda t: None, timeout=0.3)
        after = producer.await_outcomes(1, 5)
        return lsb, held_back, before, after


def _unknown_dtype(ring, at):
    ring[at + 12:at + 13] = b"\xee"


def _an_unknown_flag_beside_position(ring, at):
    ring[at + 15:at + 16] = b"\x81"  # refused at the flags, before any string is read


@pytest.mark.parametrize("mangle", [_unknown_dtype, _an_unknown_flag_beside_position])
def test_a_position_record_failing_its_checks_is_refused_before_the_position_passes_it(shm_env, mangle):
    """A POSITION record the decoder refuses (its length frames it, its uuid and producer read from its raw bytes) is
    refused to its producer before the handled position passes it, as the JVM consumer does: never DELIVERED.

    Negative control (run by hand): without the refusal queued for a record the decoder refused, the position passed
    it at once and the producer's poll told it DELIVERED (`before` held the outcome with failure None)."""
    lsb, held_back, before, after = _record_failing_its_checks(shm_env, mangle)
    assert held_back, "the position passed the refused record before its refusal was written"
    assert before == []
    assert [(o.uuid_lsb, o.failure) for o in after] == [(lsb, REFUSED)]


def test_a_record_refused_by_the_python_decoder_names_whom_to_tell():
    d = f.Descriptor(1, -2, "r", "producer", 1, (4,), 4, f.PLACEMENT_ARENA,
                     f.segment_name(f.namespace(DEPLOYMENT), "producer", "0a1b2c3d", 0), 0, f.FLAG_POSITION)
    record = bytearray(f.encode_descriptor(d))
    record[12] = 0xEE  # dtype
    sender, items = f.decode_message(f.DESCRIPTORS, f.encode_message("producer", 1, bytes(record)),
                                     f.namespace(DEPLOYMENT))
    assert isinstance(items[0], f.DescriptorFormatError) and items[0].refusable == ("producer", 1, -2, 1)
    record[0] ^= 0xFF  # magic: nothing read from it is believed
    _, items = f.decode_message(f.DESCRIPTORS, f.encode_message("producer", 1, bytes(record)), f.namespace(DEPLOYMENT))
    assert items[0].refusable is None


def test_the_producer_reads_its_ring_to_the_tail_before_it_believes_the_position(shm_env):
    """A refusal that lies in the producer's ring behind more messages than one read takes: the position passed the
    record, and the producer, reading only part of its ring, would tell DELIVERED; reading up to the tail it loaded
    after the position, it finds the refusal first.

    Negative control (run by hand): with the read up to the tail taken out of the producer's rule, it told the
    refused tensor DELIVERED here."""
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        lsb = producer.post("consumer", "stale", np.full(64, 3, np.uint8))
        key, slot = _slot_of(producer, lsb)
        at = f.stamp_at(slot.offset, slot.nbytes)
        slot.file.map[at:at + 16] = struct.pack("<qq", key[0], key[1] ^ 1)
        noise = PeerMailbox(shm_env["MSTAR_SHM_DIR"], producer.ns, "producer")
        try:
            for _ in range(200):  # empty ACK messages: read, and believed about nothing
                noise.write(f.ACKS, f.encode_message("noise", 0, b""), 0)
        finally:
            noise.close()
        assert consumer.receive(lambda t: None, timeout=0.2) == 0
        assert consumer.mailbox.handled >= producer.in_flight[key].position, "the refusal written, then the position"
        assert [(o.uuid_lsb, o.failure) for o in producer.poll_outcomes()] == [(lsb, REFUSED)]


def test_a_kept_message_waiting_for_room_holds_the_position_back(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        lsb = producer.post("consumer", "kept", np.full(64, 5, np.uint8))
        key, _ = _slot_of(producer, lsb)
        end = producer.in_flight[key].position
        _fill(shm_env, "producer", producer.ns)
        kept = []
        assert consumer.receive(lambda t: kept.append(t.array[1:]), timeout=5) == 1
        assert consumer.mailbox.handled < end and consumer.pending_kept
        assert producer.poll_outcomes() == []  # drains the filler; the position has not passed
        consumer.receive(lambda t: None, timeout=0.1)
        assert consumer.mailbox.handled >= end and not consumer.pending_kept
        assert producer.await_outcomes(1, 0.3) == [] and producer.stats["kept"] == 1
        kept.clear()
        consumer.receive(lambda t: None, timeout=0.1)
        assert [(o.uuid_lsb, o.failure) for o in producer.await_outcomes(1, 5)] == [(lsb, None)]


def test_the_position_never_passes_a_record_left_for_a_later_pass(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        lsbs = [producer.post("consumer", str(i), np.zeros(16, np.uint8)) for i in range(3)]
        ends = [producer.in_flight[k].position for k in producer.in_flight]
        assert consumer.receive(lambda t: None, timeout=5, limit=1) == 1
        assert ends[0] <= consumer.mailbox.handled < ends[1]
        assert [o.uuid_lsb for o in producer.await_outcomes(3, 0.5)] == lsbs[:1]
        assert consumer.receive(lambda t: None, timeout=5, limit=2) == 2
        assert consumer.mailbox.handled == ends[2]
        assert [o.uuid_lsb for o in producer.await_outcomes(2, 5)] == lsbs[1:]


def test_the_position_waits_for_a_handler_running_on_another_thread(shm_env):
    """Two threads receive at once: the second record's handler returns first, but the position passes it only
    once the first record's handler (still running) returned, and the waiting producer is woken by the doorbell."""
    first_in, release = threading.Event(), threading.Event()
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        lsbs = [producer.post("consumer", str(i), np.zeros(16, np.uint8)) for i in range(2)]
        ends = [producer.in_flight[k].position for k in producer.in_flight]

        def slow(tensor):
            first_in.set()
            release.wait(10)

        first = threading.Thread(target=lambda: consumer.receive(slow, timeout=5, limit=1))
        first.start()
        try:
            assert first_in.wait(5)
            assert consumer.receive(lambda t: None, timeout=5, limit=1) == 1  # the second record, handled
            assert consumer.mailbox.handled < ends[0]
            assert producer.await_outcomes(1, 0.3) == []
            told = []
            waiter = threading.Thread(target=lambda: told.extend(producer.await_outcomes(2, 10)))
            waiter.start()
            time.sleep(0.2)  # the producer asleep on its doorbell
            start = time.monotonic()
            release.set()
            waiter.join(10)
            assert time.monotonic() - start < 0.5, "woken by the consumer's doorbell, not its 1 s wait (0.8 s here)"
            assert consumer.mailbox.handled == ends[1]
            assert sorted(o.uuid_lsb for o in told) == sorted(lsbs) and {o.failure for o in told} == {None}
        finally:
            release.set()
            first.join(10)


def _fake_mailbox(shm_env, entity, version):
    """A live mailbox file of `entity` (this process holds its lock), ready (a non-zero incarnation), of `version`."""
    mailbox = OwnedFile(shm_env["MSTAR_SHM_DIR"], f.mailbox_name(f.namespace(DEPLOYMENT), entity),
                        f.MAILBOX_FILE_BYTES)
    struct.pack_into("<I", mailbox.map, f.VERSION_OFFSET, version)
    struct.pack_into("<q", mailbox.map, f.INCARNATION_OFFSET, 12345)
    return mailbox


def test_a_peer_mailbox_of_format_1_is_refused_at_open_with_both_versions_named(shm_env):
    old = _fake_mailbox(shm_env, "old", 0)  # a format 1 file reads 0 at the version offset
    try:
        with pytest.raises(MailboxVersionError) as e:
            PeerMailbox(shm_env["MSTAR_SHM_DIR"], f.namespace(DEPLOYMENT), "old")
        message = str(e.value)
        assert "entity old speaks format 1 (0 there)" in message and "this process speaks format 2" in message
        assert (e.value.entity, e.value.found, e.value.expected) == ("old", 0, 2)
        assert old.map[f.WRITERS_OFFSET:f.WRITERS_OFFSET + f.WRITER_SLOTS] == bytes(f.WRITER_SLOTS), "no writer slot"
        with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
            with pytest.raises(MailboxVersionError):
                producer.await_peer("old", 1)
            lsb = producer.post("old", "x", np.zeros(8, np.uint8))
            [outcome] = producer.poll_outcomes()
            assert (outcome.uuid_lsb, outcome.failure) == (lsb, REFUSED) and "speaks format 1" in outcome.detail
            assert struct.unpack_from("<q", old.map, f.RING_BYTES + f.TAIL_OFFSET)[0] == 0, "nothing written"
        struct.pack_into("<I", old.map, f.VERSION_OFFSET, f.MAILBOX_VERSION)  # the control: the same file, format 2
        PeerMailbox(shm_env["MSTAR_SHM_DIR"], f.namespace(DEPLOYMENT), "old").close()
    finally:
        old.remove()


def test_a_mailbox_says_its_version_before_its_incarnation(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer:
        m = consumer.mailbox.file.map
        assert struct.unpack_from("<I", m, f.VERSION_OFFSET)[0] == f.MAILBOX_VERSION
        assert struct.unpack_from("<q", m, f.HANDLED_OFFSET)[0] == 0


CONSUMER = """
import sys, time
from mstar_transport import Endpoint
count, keep_every = int(sys.argv[3]), int(sys.argv[4])
seen, kept = set(), []
with Endpoint.open(sys.argv[1], "consumer", env={"MSTAR_SHM_DIR": sys.argv[2]}) as ep:
    print("READY", flush=True)
    deadline = time.monotonic() + 60
    def handle(t):
        seen.add(t.request_id)
        if int(t.request_id) % keep_every == 0:
            kept.append(t.array[:1])  # kept past the handler: a kept message, then its ACK
        if len(kept) > 3:
            kept.pop(0)
    while len(seen) < count and time.monotonic() < deadline:
        ep.receive(handle, timeout=0.1, limit=256)
    kept.clear()
    end = time.monotonic() + 1
    while time.monotonic() < end:  # the last kept views' ACKs
        ep.receive(handle, timeout=0.05)
    print("SEEN", len(seen), ep.stats["acks_sent"], ep.stats["kept_sent"], flush=True)
"""


def test_a_stream_of_10000_position_posts_is_each_delivered_exactly_once(shm_env):
    count, keep_every = 10_000, 500
    child = subprocess.Popen([sys.executable, "-c", CONSUMER, DEPLOYMENT, shm_env["MSTAR_SHM_DIR"], str(count),
                              str(keep_every)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        told = {}
        with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
            posted = []
            for i in range(count):
                posted.append(producer.post("consumer", str(i), np.full(256, i % 251, np.uint8)))
                if producer.in_flight_count() > 512:
                    for o in producer.await_outcomes(1, 10):
                        told[o.uuid_lsb] = told.get(o.uuid_lsb, []) + [o.failure]
            deadline = time.monotonic() + 30
            while producer.in_flight_count() and time.monotonic() < deadline:
                for o in producer.await_outcomes(count, 1):
                    told[o.uuid_lsb] = told.get(o.uuid_lsb, []) + [o.failure]
            for o in producer.poll_outcomes():
                told[o.uuid_lsb] = told.get(o.uuid_lsb, []) + [o.failure]
            stats = dict(producer.stats)
        out, _ = child.communicate(timeout=60)
        assert sorted(told) == sorted(posted) and len(set(posted)) == count
        assert all(failures == [None] for failures in told.values()), "each told DELIVERED, exactly once"
        kept = count // keep_every
        assert out.split() == ["SEEN", str(count), str(kept), str(kept)]
        assert stats["by_position"] == count - kept and stats["kept"] == kept and stats["acks"] == kept
    finally:
        if child.poll() is None:
            child.kill()
