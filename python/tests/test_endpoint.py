"""The endpoint's promises in Python, with real files under /dev/shm: in place and read-only, exactly one outcome,
keep() holds the ACK, forged descriptors refused by name with the consumer serving on, a killed consumer told to
its producer; and the negative controls that turn the stamp check and the liveness check off."""
import os
import signal
import struct
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

from mstar_transport import CLOSED, CONSUMER_DIED, REFUSED, Endpoint
from mstar_transport import format as f
from mstar_transport.shm import PeerMailbox, address_of

DEPLOYMENT = "ipc:///tmp/mstar-python-unit"


def test_a_tensor_arrives_in_place_read_only_and_is_told_delivered_once(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        sent = {dtype: (np.arange(60) % 7).astype(dtype).reshape(3, 4, 5)
                for dtype in (np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64,
                              np.bool_)}
        uuids = {producer.post("consumer", np.dtype(dtype).name, array): dtype for dtype, array in sent.items()}
        seen = []

        def check(tensor):
            array = tensor.array
            assert not array.flags.writeable
            mapping = consumer.files.maps[tensor.descriptor.file_name].map
            assert array.ctypes.data == address_of(mapping) + tensor.descriptor.offset  # the producer's slot, no copy
            np.testing.assert_array_equal(array, sent[np.dtype(tensor.request_id).type])
            with pytest.raises(ValueError):
                array[0, 0, 0] = 1
            seen.append(tensor.request_id)

        while len(seen) < len(sent):
            assert consumer.receive(check, timeout=5) > 0
        outcomes = producer.await_outcomes(len(sent), 5)
        assert sorted(o.uuid_lsb for o in outcomes) == sorted(uuids) and all(o.failure is None for o in outcomes)
        assert producer.poll_outcomes() == [] and producer.in_flight_count() == 0


def test_a_claim_is_filled_in_place_and_each_failure_is_told_once(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer:
        producer = Endpoint.open(DEPLOYMENT, "producer", env=shm_env)
        claim = producer.claim("filled", "I32", (4, 4))
        claim.array[...] = 7
        producer.post("consumer", claim)
        nobody = producer.post("nobody", "lost", np.zeros(8, np.uint8))
        assert [(o.uuid_lsb, o.failure) for o in producer.poll_outcomes()] == [(nobody, REFUSED)]
        assert consumer.receive(lambda t: np.testing.assert_array_equal(t.array, np.full((4, 4), 7)), 5) == 1
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]
        pending = producer.post("consumer", "unread", np.ones(16, np.float32))
        closed = []
        producer.listener = type("L", (), {"failed": lambda self, *a: closed.append(a), "delivered": None})()
        producer.close()
        assert [(a[2], a[3]) for a in closed] == [(pending, CLOSED)]
        consumer.receive(lambda t: None, timeout=0.5)  # the producer is gone: its ACK goes nowhere, nothing breaks


def test_a_kept_tensor_is_acked_when_its_lease_closes(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        producer.post("consumer", "kept", np.arange(10, dtype=np.int64))
        kept = []
        consumer.receive(lambda t: kept.append(t.keep()), timeout=5)
        assert producer.await_outcomes(1, 0.5) == [], "not ACKed while kept"
        with kept[0] as lease:
            assert int(lease.array.sum()) == 45
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]


def _forge(shm_env, consumer_entity, records):
    ns = f.namespace(DEPLOYMENT)
    peer = PeerMailbox(shm_env["MSTAR_SHM_DIR"], ns, consumer_entity)
    try:
        for mtype, body in records:
            peer.write(mtype, body)
    finally:
        peer.close()


def _descriptor(producer, claim, **changes):
    fields = dict(uuid_msb=claim.uuid_msb, uuid_lsb=claim.uuid_lsb, request_id=claim.request_id,
                  producer=producer.entity, dtype=claim.dtype_code, shape=claim.shape, nbytes=claim.slot.nbytes,
                  placement=f.PLACEMENT_ARENA, file_name=os.path.basename(claim.slot.file.path),
                  offset=claim.slot.offset)
    fields.update(changes)
    return f.Descriptor(**fields)


def _forged_batch(producer):
    """Hostile records beside one good tensor: each must be refused, and the good one still handed over."""
    stale = producer.claim("stale", "U8", (64,))  # a real slot, named under another uuid: its stamp differs
    good = producer.claim("good", "U8", (64,))
    good.array[...] = 9
    ns = f.namespace(DEPLOYMENT)
    bad = [
        _descriptor(producer, stale, uuid_lsb=stale.uuid_lsb ^ 1, request_id="stale"),
        _descriptor(producer, stale, file_name=f.segment_name("0" * 16, producer.entity, "00000000", 0)),
        _descriptor(producer, stale, offset=1 << 40, request_id="outside"),
        _descriptor(producer, stale, file_name=f.segment_name(ns, producer.entity, "ffffffff", 9)),
    ]
    records = [(f.DESCRIPTORS, f.encode_message(producer.entity, 1, f.encode_descriptor(d))) for d in bad]
    broken = bytearray(f.encode_descriptor(bad[0]))
    broken[0] ^= 0xFF  # magic
    records.append((f.DESCRIPTORS, f.encode_message(producer.entity, 1, bytes(broken))))
    records.append((f.DESCRIPTORS, b"\x00garbage"))
    records.append((7, b"an unknown record type"))
    records.append((f.ACKS, f.encode_message(producer.entity, 1, b"short")))
    records.append((f.DESCRIPTORS, f.encode_message(producer.entity, 1,
                                                    f.encode_descriptor(_descriptor(producer, good)))))
    return records


def test_forged_descriptors_are_refused_and_the_consumer_serves_on(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "forger", env=shm_env) as forger:
        _forge(shm_env, "consumer", _forged_batch(forger))
        handed = []
        deadline = time.monotonic() + 5
        while "good" not in handed and time.monotonic() < deadline:
            consumer.receive(lambda t: handed.append((t.request_id, int(t.array.sum()))) or None, timeout=0.2)
        assert handed == [("good", 9 * 64)], handed
        assert consumer.stats["stale_reads"] == 1
        assert consumer.stats["bad_descriptors"] == 6  # namespace, outside, no such file, magic, garbage, short ACKs


def test_without_the_stamp_check_a_reused_slot_is_handed_over(shm_env):
    """The negative control: the same forged batch, with the check off, hands the stale tensor over."""
    env = dict(shm_env, MSTAR_TEST_NO_STAMP_CHECK="1")
    with Endpoint.open(DEPLOYMENT, "consumer", env=env) as consumer, \
            Endpoint.open(DEPLOYMENT, "forger", env=shm_env) as forger:
        _forge(shm_env, "consumer", _forged_batch(forger))
        handed = []
        deadline = time.monotonic() + 5
        while "good" not in handed and time.monotonic() < deadline:
            consumer.receive(lambda t: handed.append(t.request_id), timeout=0.2)
        assert "stale" in handed and consumer.stats["stale_reads"] == 0


CHILD = """
import sys, time
from mstar_transport import Endpoint
ep = Endpoint.open(sys.argv[1], "mortal", env={"MSTAR_SHM_DIR": sys.argv[2]})
print("READY", flush=True)
time.sleep(600)
"""


def _killed_consumer_outcomes(env, wait_s):
    child = subprocess.Popen([sys.executable, "-c", CHILD, DEPLOYMENT, env["MSTAR_SHM_DIR"]], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        with Endpoint.open(DEPLOYMENT, "producer", env=env) as producer:
            lsbs = [producer.post("mortal", str(i), np.full(1024, i, np.uint8)) for i in range(5)]
            child.send_signal(signal.SIGKILL)
            child.wait()
            outcomes = producer.await_outcomes(5, wait_s)
            return lsbs, outcomes
    finally:
        if child.poll() is None:
            child.kill()
        for name in os.listdir(env["MSTAR_SHM_DIR"]):  # the killed consumer's mailbox, as a sweep removes it
            if name.endswith("_mailbox_mortal"):
                os.unlink(os.path.join(env["MSTAR_SHM_DIR"], name))


def test_a_consumer_killed_with_its_tensors_is_told_to_the_producer(shm_env):
    lsbs, outcomes = _killed_consumer_outcomes(shm_env, 5)
    assert sorted(o.uuid_lsb for o in outcomes) == sorted(lsbs)
    assert {o.failure for o in outcomes} == {CONSUMER_DIED}


def test_without_the_liveness_check_a_killed_consumers_tensors_wait(shm_env):
    """The negative control: with the check off, no outcome comes (close then tells them CLOSED)."""
    env = dict(shm_env, MSTAR_TEST_NO_LIVENESS="1")
    _, outcomes = _killed_consumer_outcomes(env, 2.5)
    assert outcomes == []


def test_torch_reads_a_received_view_without_a_copy(shm_env):
    torch = pytest.importorskip("torch", reason="no torch here (Debian's python3-torch provides a CPU one)")
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        producer.post("consumer", "t", torch.arange(12, dtype=torch.float32).reshape(3, 4))
        pointers = []

        def check(tensor):
            with warnings.catch_warnings():  # torch has no read-only tensors: it warns (once a process)
                warnings.simplefilter("ignore", UserWarning)
                t = torch.from_numpy(tensor.array)
            pointers.append((t.data_ptr(), tensor.array.ctypes.data, float(t.sum())))

        consumer.receive(check, timeout=5)
        assert pointers[0][0] == pointers[0][1] and pointers[0][2] == 66.0


def test_a_message_too_long_for_the_ring_is_refused_by_the_writer(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env):
        peer = PeerMailbox(shm_env["MSTAR_SHM_DIR"], f.namespace(DEPLOYMENT), "consumer")
        try:
            with pytest.raises(ValueError):
                peer.write(f.ACKS, b"x" * (f.RING_BYTES // 8 + 1))
        finally:
            peer.close()


def test_the_ring_wraps_with_a_padding_record(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer:
        peer = PeerMailbox(shm_env["MSTAR_SHM_DIR"], f.namespace(DEPLOYMENT), "consumer")
        try:
            body = f.encode_message("writer", 0, b"")
            payload = body + b"\0" * (100_000 - len(body))
            for _ in range(40):  # 4 MB through a 1 MiB ring: wraps several times
                peer.write(f.ACKS, f.encode_message("writer", 0, b""))
                peer.write(9, payload)
                for mtype, message, _ in consumer.mailbox.read(64):
                    assert mtype == f.ACKS and message == body
            assert consumer.mailbox.skipped()[0] >= 40  # the unknown type 9, skipped by its length
            head = struct.unpack_from("<q", consumer.mailbox.file.map, f.RING_BYTES + f.HEAD_OFFSET)[0]
            assert head > f.RING_BYTES
        finally:
            peer.close()


def test_sigterm_closes_the_endpoint_and_leaves_no_file(shm_env):
    child = subprocess.Popen([sys.executable, "-c", CHILD, DEPLOYMENT, shm_env["MSTAR_SHM_DIR"]],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "READY"
    assert len(os.listdir(shm_env["MSTAR_SHM_DIR"])) == 1
    child.send_signal(signal.SIGTERM)
    assert child.wait(10) == 128 + signal.SIGTERM
    assert os.listdir(shm_env["MSTAR_SHM_DIR"]) == []
