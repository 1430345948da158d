"""Exactly one outcome per post that returned, none for one that raised, whoever calls the endpoint: several
threads on one endpoint, listeners that raise, waits that return as soon as an outcome is told, close then poll."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mstar_transport import CLOSED, CONSUMER_DIED, Endpoint, Listener
from mstar_transport.shm import PeerMailbox

DEPLOYMENT = "ipc:///tmp/mstar-python-threads"


class Recorder(Listener):
    def __init__(self, fail_on=()):
        self.told = []
        self.fail_on = fail_on

    def delivered(self, request_id, msb, lsb):
        self.told.append((request_id, None))
        if request_id in self.fail_on:
            raise AssertionError(f"listener fails on {request_id}")

    def failed(self, request_id, msb, lsb, failure, detail):
        self.told.append((request_id, failure))


def _consume(consumer, seen, stop):
    while not stop.is_set():
        consumer.receive(lambda t: seen.append(t.request_id), timeout=0.05, limit=256)


def test_two_threads_posting_on_one_endpoint_duplicate_nothing_and_lose_nothing(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        seen, outcomes, errors, stop = [], [], [], threading.Event()
        reader = threading.Thread(target=_consume, args=(consumer, seen, stop))
        reader.start()

        def post(name):
            try:
                for i in range(150):
                    if i % 2:
                        claim = producer.claim(f"{name}-{i}", "U8", (32768,))
                        claim.array[...] = i
                        producer.post("consumer", claim)
                    else:
                        producer.post("consumer", f"{name}-{i}", np.full(32768, i, np.uint8))
                    if i % 8 == 7:
                        outcomes.extend(producer.await_outcomes(1, 5))
            except BaseException as e:  # noqa: B902 - the test reports every error
                errors.append(e)

        threads = [threading.Thread(target=post, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        deadline = time.monotonic() + 10
        while len(outcomes) < 300 and time.monotonic() < deadline:
            outcomes.extend(producer.await_outcomes(300 - len(outcomes), 1))
        stop.set()
        reader.join(10)
        assert errors == []
        assert len(seen) == 300 and len(set(seen)) == 300, "every tensor handed exactly once"
        assert sorted(o.request_id for o in outcomes) == sorted(seen)
        assert {o.failure for o in outcomes} == {None}, "no false CONSUMER_DIED"


def test_await_outcomes_returns_as_soon_as_an_outcome_is_told_and_when_nothing_is_in_flight(shm_env):
    listener = Recorder()
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", listener=listener, env=shm_env) as producer:
        for i in range(3):
            producer.post("consumer", str(i), np.zeros(16, np.uint8))
        assert consumer.receive(lambda t: None, timeout=5, limit=1) == 1
        start = time.monotonic()
        producer.await_outcomes(1, 10)
        assert time.monotonic() - start < 2 and listener.told == [("0", None)]
        while consumer.receive(lambda t: None, timeout=0.5):
            pass
        start = time.monotonic()
        producer.await_outcomes(100, 10)  # fewer will come: it returns once nothing is in flight
        assert time.monotonic() - start < 2 and len(listener.told) == 3 and producer.in_flight_count() == 0


def test_a_listener_that_raises_loses_no_outcome(shm_env):
    listener = Recorder(fail_on=("1",))
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", listener=listener, env=shm_env) as producer:
        for i in range(5):
            producer.post("consumer", str(i), np.zeros(16, np.uint8))
        assert consumer.receive(lambda t: None, timeout=5, limit=5) == 5  # one ACK message for all five
        time.sleep(0.1)
        with pytest.raises(AssertionError, match="listener fails on 1"):
            producer.poll_outcomes()
        assert sorted(listener.told) == [(str(i), None) for i in range(5)]
        assert producer.in_flight_count() == 0


def test_a_receive_with_a_listener_returns_when_an_ack_is_read(shm_env):
    """The README's producer pumps outcomes with receive(handler, timeout) when its window is full: the wait ends on
    the ACK, never runs out its timeout."""
    listener = Recorder()
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", listener=listener, env=shm_env) as producer:
        producer.post("consumer", "x", np.zeros(16, np.uint8))
        stop = threading.Event()
        reader = threading.Thread(target=_consume, args=(consumer, [], stop))
        reader.start()
        try:
            start = time.monotonic()
            producer.receive(lambda t: None, timeout=5)
            assert time.monotonic() - start < 2 and listener.told == [("x", None)]
        finally:
            stop.set()
            reader.join(10)


CLOSE_THEN_POLL = """
import sys, numpy as np
from mstar_transport import Endpoint
env = {"MSTAR_SHM_DIR": sys.argv[1]}
with Endpoint.open("ipc:///tmp/mstar-python-threads", "consumer", env=env):
    producer = Endpoint.open("ipc:///tmp/mstar-python-threads", "producer", env=env)
    lsb = producer.post("consumer", "unread", np.zeros(16, np.uint8))
    producer.close()
    print([(o.uuid_lsb == lsb, o.failure) for o in producer.poll_outcomes()], producer.poll_outcomes(), flush=True)
"""


def test_poll_outcomes_after_close_returns_the_closed_ones(shm_env):
    done = subprocess.run([sys.executable, "-c", CLOSE_THEN_POLL, shm_env["MSTAR_SHM_DIR"]], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"[(True, '{CLOSED}')] []"


def _free_bytes(endpoint):
    return sum(sum(s.sizes.values()) for s in endpoint.arena.segments)


def test_a_post_that_raises_frees_its_slot_and_tells_nothing(shm_env, monkeypatch):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        producer.post("consumer", "first", np.zeros(16, np.uint8))
        consumer.receive(lambda t: None, timeout=5)
        assert len(producer.await_outcomes(1, 5)) == 1
        free = _free_bytes(producer)
        with pytest.raises(ValueError):
            producer.post("../etc", "bad name", np.zeros(4096, np.uint8))

        def broken(*args, **kwargs):
            raise OSError("disk on fire")

        monkeypatch.setattr(PeerMailbox, "write", broken)
        with pytest.raises(OSError):
            producer.post("consumer", "oserror", np.zeros(4096, np.uint8))
        claim = producer.claim("interrupted", "U8", (4096,))
        view = claim.array

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(PeerMailbox, "write", interrupted)
        with pytest.raises(KeyboardInterrupt):
            producer.post("consumer", claim)
        monkeypatch.undo()
        assert _free_bytes(producer) < free, "a view of the claim still holds its slot"
        del view
        assert producer.poll_outcomes() == [] and producer.in_flight_count() == 0
        assert _free_bytes(producer) == free, "every failed post gave its slot back"


def test_a_claim_is_posted_once(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        claim = producer.claim("once", "U8", (8,))
        producer.post("consumer", claim)
        with pytest.raises(ValueError, match="posted already"):
            producer.post("consumer", claim)
        consumer.receive(lambda t: None, timeout=5)
        assert [o.failure for o in producer.await_outcomes(2, 2)] == [None]


def test_a_ring_full_for_long_keeps_the_acks_and_a_writer_drains_its_own_mailbox(shm_env):
    """A producer whose mailbox is full: the consumer's ACK waits for room (kept, never dropped as if the producer
    were dead), and the consumer's receive does not block on it. (The post goes without the POSITION flag, so that
    it is ACKed by message; test_position.py holds the kept message that waits for room before the position.)"""
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=dict(shm_env, MSTAR_TEST_NO_POSITION="1")) as producer:
        filler = PeerMailbox(shm_env["MSTAR_SHM_DIR"], producer.ns, "producer")
        try:
            for size in (100_000, 1000, 0):  # records of an unknown type, skipped by the reader, to the last byte
                while filler.write(9, b"\0" * size, 0):
                    pass
        finally:
            filler.close()
        producer.post("consumer", "x", np.zeros(16, np.uint8))
        start = time.monotonic()
        assert consumer.receive(lambda t: None, timeout=5) == 1
        assert time.monotonic() - start < 5
        producer.poll_outcomes()  # drains the filler's records
        consumer.receive(lambda t: None, timeout=0.1)
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]


def test_two_endpoints_posting_to_each_other_never_stall(shm_env):
    count = 9000  # more descriptors than one mailbox ring holds
    results = {}
    with Endpoint.open(DEPLOYMENT, "a", env=shm_env) as a, Endpoint.open(DEPLOYMENT, "b", env=shm_env) as b:
        def run(me, other):
            got = []
            for i in range(count):
                me.post(other, str(i), np.zeros(8, np.uint8))
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                me.receive(lambda t: got.append(t.request_id), timeout=0.1, limit=1024)
            outcomes = []
            while len(outcomes) < count and time.monotonic() < deadline:
                outcomes += me.await_outcomes(count - len(outcomes), 0.5)
                me.receive(lambda t: None, timeout=0)
            results[me.entity] = (len(got), sorted({o.failure for o in outcomes}, key=str), len(outcomes))

        threads = [threading.Thread(target=run, args=(a, "b")), threading.Thread(target=run, args=(b, "a"))]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert time.monotonic() - start < 25
        assert results == {"a": (count, [None], count), "b": (count, [None], count)}


def test_a_consumer_killed_while_threads_post_is_told_once_each(shm_env):
    """Threads sharing an endpoint get one outcome per post, and CONSUMER_DIED only for a dead consumer."""
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom mstar_transport import Endpoint\n"
                              "ep = Endpoint.open(sys.argv[1], 'mortal', env={'MSTAR_SHM_DIR': sys.argv[2]})\n"
                              "print('READY', flush=True)\ntime.sleep(600)\n", DEPLOYMENT, shm_env["MSTAR_SHM_DIR"]],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
            lsbs = []
            threads = [threading.Thread(target=lambda: lsbs.extend(
                producer.post("mortal", str(i), np.zeros(64, np.uint8)) for i in range(20))) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            child.kill()
            child.wait()
            outcomes = producer.await_outcomes(40, 5)
            assert sorted(o.uuid_lsb for o in outcomes) == sorted(lsbs) and len(lsbs) == 40
            assert {o.failure for o in outcomes} == {CONSUMER_DIED}
    finally:
        child.kill()
        for name in os.listdir(shm_env["MSTAR_SHM_DIR"]):
            if name.endswith("_mailbox_mortal"):
                os.unlink(os.path.join(shm_env["MSTAR_SHM_DIR"], name))


def test_a_close_from_another_thread_waits_for_the_handler_running_and_its_tensor_is_delivered(shm_env):
    """A supervisor thread closes the consumer while a handler runs on the receiving thread: the close waits for
    the handler, whose tensor is ACKed (DELIVERED), not left to the mailbox's death (CONSUMER_DIED)."""
    in_handler, release = threading.Event(), threading.Event()
    with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        consumer = Endpoint.open(DEPLOYMENT, "consumer", env=shm_env)
        try:
            producer.post("consumer", "handled", np.zeros(64, np.uint8))

            def handler(tensor):
                in_handler.set()
                release.wait(10)

            receiving = threading.Thread(target=lambda: consumer.receive(handler, timeout=10))
            receiving.start()
            assert in_handler.wait(10)
            closing = threading.Thread(target=consumer.close)
            closing.start()
            closing.join(0.3)  # the close has begun: it waits for the handler
            release.set()
            closing.join(10)
            receiving.join(10)
        finally:
            release.set()
            consumer.close()
        assert [(o.request_id, o.failure) for o in producer.await_outcomes(1, 10)] == [("handled", None)]
