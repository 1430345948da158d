"""Processes that die, restart and fork: tensors in flight are keyed by the consumer's incarnation; a forked child
neither holds nor removes its parent's files; dead owners' files are swept by Python workers too; a record
claimed and never published is skipped as the JVM's reader skips it."""
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np

from mstar_transport import CONSUMER_DIED, Endpoint
from mstar_transport import format as f
from mstar_transport.shm import PeerMailbox, sweep

DEPLOYMENT = "ipc:///tmp/mstar-python-lifecycle"

IDLE = """
import sys, time
from mstar_transport import Endpoint
ep = Endpoint.open(sys.argv[1], sys.argv[3], env={"MSTAR_SHM_DIR": sys.argv[2]})
print("READY", flush=True)
time.sleep(600)
"""

READER = """
import sys, time
from mstar_transport import Endpoint
with Endpoint.open(sys.argv[1], sys.argv[3], env={"MSTAR_SHM_DIR": sys.argv[2]}) as ep:
    print("READY", flush=True)
    handed = []
    deadline = time.monotonic() + 20
    while not handed and time.monotonic() < deadline:
        ep.receive(lambda t: handed.append(t.request_id), timeout=0.2)
    print("HANDED", handed, flush=True)
    while True:  # alive until killed: its predecessor's tensors must be told dead while it lives
        ep.receive(lambda t: None, timeout=1)
"""


def _start(script, env, entity, *args):
    child = subprocess.Popen([sys.executable, "-c", script, DEPLOYMENT, env["MSTAR_SHM_DIR"], entity, *args],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "READY"
    return child


def _remove_dead(env):
    """The killed workers' files (mailbox, stats file), as the next sweep of any worker would take them."""
    sweep(env["MSTAR_SHM_DIR"])


def test_a_restarted_consumers_predecessor_is_told_dead_for_its_tensors(shm_env):
    with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        first = _start(IDLE, shm_env, "mortal")
        old = [producer.post("mortal", f"old-{i}", np.zeros(64, np.uint8)) for i in range(3)]
        first.kill()
        first.wait()
        second = _start(READER, shm_env, "mortal")  # takes the dead one's place under the same entity
        try:
            time.sleep(1.2)  # past the producer's once-a-second look at the peer: the next post maps the new one
            new = producer.post("mortal", "new", np.zeros(64, np.uint8))
            outcomes = {o.uuid_lsb: o.failure for o in producer.await_outcomes(4, 6)}
            assert outcomes == {**{lsb: CONSUMER_DIED for lsb in old}, new: None}
            assert second.stdout.readline().strip() == "HANDED ['new']"
        finally:
            second.kill()
            second.wait()
            _remove_dead(shm_env)


FORKED = """
import os, sys, time, numpy as np
from mstar_transport import Endpoint
directory = sys.argv[2]
with Endpoint.open(sys.argv[1], sys.argv[3], env={"MSTAR_SHM_DIR": directory}) as ep:
    mailbox = ep.mailbox.file.path
    pid = os.fork()
    if pid == 0:
        if sys.argv[4] == "sleep":
            time.sleep(600)
            os._exit(0)
        try:
            ep.post("nobody", "from-the-child", np.zeros(8, np.uint8))
            print("CHILD POSTED", flush=True)
        except RuntimeError as e:
            print("CHILD REFUSED", "forked child" in str(e), flush=True)
        sys.exit(0)  # the child leaves the with block and runs its atexit hooks
    if sys.argv[4] == "sleep":
        print("READY", pid, flush=True)
        time.sleep(600)
    os.waitpid(pid, 0)
    print("MAILBOX KEPT", os.path.exists(mailbox), flush=True)
    ep.post(sys.argv[3], "to-itself", np.zeros(8, np.uint8))
    print("HANDED", ep.receive(lambda t: None, timeout=5), flush=True)
"""


def test_a_forked_child_refuses_the_endpoint_and_leaves_the_parents_files(shm_env):
    done = subprocess.run([sys.executable, "-c", FORKED, DEPLOYMENT, shm_env["MSTAR_SHM_DIR"], "parent", "exit"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["CHILD REFUSED True", "MAILBOX KEPT True", "HANDED 1"]


def test_a_sigkilled_parent_is_found_dead_while_its_forked_child_lives(shm_env):
    parent = subprocess.Popen([sys.executable, "-c", FORKED, DEPLOYMENT, shm_env["MSTAR_SHM_DIR"], "mortal", "sleep"],
                              stdout=subprocess.PIPE, text=True)
    ready, child = parent.stdout.readline().split()
    assert ready == "READY"
    try:
        with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
            lsbs = [producer.post("mortal", str(i), np.zeros(64, np.uint8)) for i in range(2)]
            parent.kill()
            parent.wait()
            outcomes = producer.await_outcomes(2, 5)
            assert sorted(o.uuid_lsb for o in outcomes) == sorted(lsbs)
            assert {o.failure for o in outcomes} == {CONSUMER_DIED}
    finally:
        parent.kill()
        os.kill(int(child), signal.SIGKILL)
        _remove_dead(shm_env)


PRODUCER = """
import sys, time, numpy as np
from mstar_transport import Endpoint
ep = Endpoint.open(sys.argv[1], sys.argv[3], env={"MSTAR_SHM_DIR": sys.argv[2]})
ep.post("consumer", "0", np.zeros(4096, np.uint8))
print("READY", ep.arena.nonce, flush=True)
time.sleep(600)
"""


def test_a_sigkilled_producers_files_are_swept_when_a_python_worker_starts(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer:
        child = subprocess.Popen([sys.executable, "-c", PRODUCER, DEPLOYMENT, shm_env["MSTAR_SHM_DIR"], "producer"],
                                 stdout=subprocess.PIPE, text=True)
        ready, nonce = child.stdout.readline().split()
        assert consumer.receive(lambda t: None, timeout=5) == 1
        child.kill()
        child.wait()
        assert any(nonce in name for name in os.listdir(shm_env["MSTAR_SHM_DIR"]))
        with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as successor:
            assert not any(nonce in name for name in os.listdir(shm_env["MSTAR_SHM_DIR"])), "swept at start"
            successor.post("consumer", "1", np.zeros(4096, np.uint8))
            assert consumer.receive(lambda t: None, timeout=5) == 1
            assert [o.failure for o in successor.await_outcomes(1, 5)] == [None]
    # the directory is empty now: the fixture checks it


def _claim_and_die(consumer, ring_bytes=64):
    """Claims a record in the consumer's ring as a writer would and writes its header, never publishing it."""
    peer = PeerMailbox(consumer.directory, consumer.ns, consumer.entity)
    try:
        base = f.RING_BYTES
        tail = struct.unpack_from("<q", peer.map, base + f.TAIL_OFFSET)[0]
        struct.pack_into("<q", peer.map, base + f.TAIL_OFFSET, tail + ring_bytes)
        struct.pack_into("<i", peer.map, tail & (f.RING_BYTES - 1), -ring_bytes)
        return peer.slot
    finally:
        peer.close()


def _time_to_get_past_a_stuck_claim(shm_env, dead_writer):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        slot = _claim_and_die(consumer)
        if dead_writer:  # registered, and nobody holds its slot's lock any more
            consumer.mailbox.file.map[f.WRITERS_OFFSET + slot + 100] = 1
        producer.post("consumer", "after", np.zeros(8, np.uint8))
        start = time.monotonic()
        handed = []
        while not handed and time.monotonic() - start < 6:
            consumer.receive(lambda t: handed.append(t.request_id), timeout=0.2)
        assert handed == ["after"] and consumer.stats["skipped_claims"] == 1
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]
        return time.monotonic() - start


def test_a_claim_whose_writer_died_is_skipped_after_a_second(shm_env):
    assert 0.9 < _time_to_get_past_a_stuck_claim(shm_env, True) < 2.5


def test_a_claim_never_published_is_skipped_after_three_seconds_whatever_the_writers(shm_env):
    assert 2.9 < _time_to_get_past_a_stuck_claim(shm_env, False) < 4.5
