"""Files opened as the JVM opens them (O_NONBLOCK | O_NOFOLLOW, then fstat: a regular file of our uid): a
directory, a link, a FIFO or another user's file at a segment, spill or mailbox name is a typed error, counted,
and the endpoint serves on; a forged zero-byte descriptor with huge dimensions is refused; a segment truncated
under a reader is refused, never a SIGBUS."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from mstar_transport import REFUSED, Endpoint
from mstar_transport import format as f
from mstar_transport.shm import PeerMailbox

DEPLOYMENT = "ipc:///tmp/mstar-python-hostile"


def _in_time(fn, seconds=15):
    """Runs fn on a thread: a call that blocks (a FIFO opened without O_NONBLOCK) fails the test, never hangs it."""
    result = []
    t = threading.Thread(target=lambda: result.append(_outcome(fn)), daemon=True)
    t.start()
    t.join(seconds)
    assert result, "blocked"
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def _outcome(fn):
    try:
        return fn()
    except BaseException as e:  # noqa: B902 - handed to the test's thread
        return e


def _hostile(path, kind):
    if kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        os.symlink("/etc/passwd", path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:  # another user's file
        with open(path, "wb") as out:
            out.write(b"\0" * (2 << 20))
        os.chown(path, 4321, 4321)


KINDS = ["directory", "symlink", "fifo"] + (["other-user"] if os.geteuid() == 0 else [])


def _forge(directory, ns, to, records):
    peer = PeerMailbox(directory, ns, to)
    try:
        for body in records:
            peer.write(f.DESCRIPTORS, body)
    finally:
        peer.close()


def _descriptor(owner, claim, **changes):
    fields = dict(uuid_msb=claim.uuid_msb, uuid_lsb=claim.uuid_lsb, request_id=claim.request_id,
                  producer=owner.entity, dtype=claim.dtype_code, shape=claim.shape, nbytes=claim.slot.nbytes,
                  placement=f.PLACEMENT_ARENA, file_name=os.path.basename(claim.slot.file.path),
                  offset=claim.slot.offset)
    fields.update(changes)
    return f.encode_message(owner.entity, 1, f.encode_descriptor(f.Descriptor(**fields)))


def test_hostile_files_at_segment_and_spill_names_are_refused_and_the_consumer_serves_on(shm_env):
    directory = shm_env["MSTAR_SHM_DIR"]
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        claim = producer.claim("bait", "U8", (64,))
        good = producer.claim("good", "U8", (64,))
        good.array[...] = 5
        records = []
        for i, kind in enumerate(KINDS):
            segment = f.segment_name(producer.ns, "producer", f"{i:08x}", 0)
            spill = f.spill_name(producer.ns, "producer", f"{i:08x}", __import__("uuid").UUID(int=i + 1))
            _hostile(os.path.join(directory, segment), kind)
            _hostile(os.path.join(directory, spill), kind)
            records.append(_descriptor(producer, claim, file_name=segment, request_id=kind))
            records.append(_descriptor(producer, claim, file_name=spill, placement=f.PLACEMENT_SPILL, offset=0,
                                       request_id=kind))
        records.append(_descriptor(producer, good))
        _forge(directory, producer.ns, "consumer", records)
        handed = []
        try:
            while "good" not in handed:
                assert _in_time(lambda: consumer.receive(lambda t: handed.append(t.request_id), timeout=2)) or handed
            assert handed == ["good"]
            assert consumer.stats["refused_files"] == 2 * len(KINDS)
        finally:
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    os.rmdir(path)
                elif "_arena_producer_0000" in name or "_spill_" in name:
                    os.unlink(path)


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_files_at_a_mailbox_name_are_refused_and_the_endpoint_serves_on(shm_env, kind):
    directory = shm_env["MSTAR_SHM_DIR"]
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        path = os.path.join(directory, f.mailbox_name(producer.ns, "ghost"))
        _hostile(path, kind)
        try:
            _in_time(lambda: producer.post("ghost", "to-a-ghost", np.zeros(8, np.uint8)))
            assert [o.failure for o in producer.poll_outcomes()] == [REFUSED]
            claim = producer.claim("from-a-ghost", "U8", (8,))  # a descriptor whose producer's mailbox is hostile
            _forge(directory, producer.ns, "consumer", [_descriptor(producer, claim, producer="ghost")])
            assert _in_time(lambda: consumer.receive(lambda t: None, timeout=2)) == 1
            assert consumer.stats["unreachable_peers"] == 1  # its ACK had nowhere to go: counted, not raised
            producer.post("consumer", "after", np.zeros(8, np.uint8))
            assert consumer.receive(lambda t: None, timeout=2) == 1
            assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]
        finally:
            os.rmdir(path) if kind == "directory" else os.unlink(path)


def test_a_zero_byte_descriptor_with_huge_dimensions_is_refused(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        claim = producer.claim("huge", "F32", (0,))
        good = producer.claim("good", "U8", (8,))
        _forge(shm_env["MSTAR_SHM_DIR"], producer.ns, "consumer",
               [_descriptor(producer, claim, shape=(0, 1 << 40, 1 << 40)), _descriptor(producer, good)])
        handed = []
        while "good" not in handed:
            assert consumer.receive(lambda t: handed.append(t.request_id), timeout=2) or handed
        assert handed == ["good"] and consumer.stats["bad_descriptors"] == 1
        producer.post("consumer", claim)
        producer.post("consumer", good)  # the forged copies were refused: these are the producer's own
        consumer.receive(lambda t: None, timeout=2, limit=2)


TRUNCATED = """
import os, sys, numpy as np
from mstar_transport import Endpoint
env = {"MSTAR_SHM_DIR": sys.argv[1], "MSTAR_SHM_ARENA_SEGMENT_MB": "4"}
consumer = Endpoint.open("ipc:///tmp/mstar-python-hostile", "consumer", env=env)
producer = Endpoint.open("ipc:///tmp/mstar-python-hostile", "producer", env=env)
producer.post("consumer", "small", np.ones(64, np.uint8))
handed = []
consumer.receive(lambda t: handed.append(int(t.array.sum())), timeout=5, limit=1)  # maps the segment
producer.post("consumer", "large", np.ones(1 << 20, np.uint8))
os.truncate(producer.arena.segments[0].file.path, 4096)  # under the consumer's mapping
consumer.receive(lambda t: handed.append(int(t.array.sum())), timeout=1)
print("handed", handed, "bad", consumer.stats["bad_descriptors"], flush=True)
for name in os.listdir(sys.argv[1]):  # the producer must not touch its truncated segment again
    os.unlink(os.path.join(sys.argv[1], name))
os._exit(0)
"""


def test_a_segment_truncated_under_a_reader_is_refused_not_a_sigbus(shm_env):
    done = subprocess.run([sys.executable, "-c", TRUNCATED, shm_env["MSTAR_SHM_DIR"]], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    assert done.stdout.strip() == "handed [64] bad 1"


def test_a_mailbox_not_sized_yet_is_a_peer_starting_looked_at_again_then_refused(shm_env):
    """A mailbox file of ours with no size yet: its owner is making it. The post looks again (as the JVM does, for
    0.5 s) and then refuses, saying the entity is starting, not that something else lies at its name; a mailbox
    sized meanwhile would have been taken."""
    directory = shm_env["MSTAR_SHM_DIR"]
    with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        path = os.path.join(directory, f.mailbox_name(producer.ns, "starting"))
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
        try:
            producer.post("starting", "early", np.zeros(8, np.uint8))
            [outcome] = producer.poll_outcomes()
            assert outcome.failure == REFUSED and "is starting" in outcome.detail, outcome.detail
        finally:
            os.unlink(path)
