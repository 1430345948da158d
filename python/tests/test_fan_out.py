"""Fan-out: one post to several consumers (one slot, the same descriptor to each), freed once each ACKed or died,
with exactly one outcome: DELIVERED when all ACKed, PARTIAL when some ACKed and the rest died or were refused,
the failure itself when none ACKed. Liveness is per consumer incarnation, as for a single consumer."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from mstar_transport import CONSUMER_DIED, PARTIAL, REFUSED, Endpoint

DEPLOYMENT = "ipc:///tmp/mstar-python-fan-out"

IDLE = """
import sys, time
from mstar_transport import Endpoint
ep = Endpoint.open(sys.argv[1], sys.argv[3], env={"MSTAR_SHM_DIR": sys.argv[2]})
print("READY", flush=True)
time.sleep(600)
"""


def _start_idle(env, entity):
    child = subprocess.Popen([sys.executable, "-c", IDLE, DEPLOYMENT, env["MSTAR_SHM_DIR"], entity],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "READY"
    return child


def _kill(child, env, entity):
    child.kill()
    child.wait()
    path = os.path.join(env["MSTAR_SHM_DIR"], "")
    for name in os.listdir(path):  # a SIGKILLed process leaves its mailbox to the next sweep
        if name.endswith(f"_mailbox_{entity}"):
            os.unlink(path + name)


def _free_bytes(endpoint):
    return sum(sum(s.sizes.values()) for s in endpoint.arena.segments)


def test_a_fan_out_that_every_consumer_acks_is_delivered_once(shm_env):
    with Endpoint.open(DEPLOYMENT, "b", env=shm_env) as b, Endpoint.open(DEPLOYMENT, "c", env=shm_env) as c, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        lsb = producer.post(["b", "c"], "fan", np.arange(1024, dtype=np.float32))
        claim = producer.claim("fan-claim", "I32", (8,))
        claim.array[...] = 7
        claim_lsb = producer.post(("b", "c"), claim)
        seen = {"b": [], "c": []}
        assert b.receive(lambda t: seen["b"].append((t.request_id, t.array.sum())), timeout=5) == 2
        assert producer.await_outcomes(1, 0.3) == [], "told before its second consumer ACKed it"
        assert producer.in_flight_count() == 2
        free = _free_bytes(producer)
        assert c.receive(lambda t: seen["c"].append((t.request_id, t.array.sum())), timeout=5) == 2
        outcomes = producer.await_outcomes(2, 5)
        assert sorted((o.uuid_lsb, o.failure) for o in outcomes) == sorted([(lsb, None), (claim_lsb, None)])
        assert seen["b"] == seen["c"] == [("fan", float(np.arange(1024).sum())), ("fan-claim", 56)]
        assert _free_bytes(producer) > free, "freed once every consumer ACKed"
        assert producer.await_outcomes(1, 0.3) == [] and producer.in_flight_count() == 0


def test_a_fan_out_whose_other_consumer_is_killed_after_one_acked_is_partial(shm_env):
    stalled = _start_idle(shm_env, "stalled")
    try:
        with Endpoint.open(DEPLOYMENT, "reader", env=shm_env) as reader, \
                Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
            lsb = producer.post(["reader", "stalled"], "fan", np.zeros(4096, np.uint8))
            assert reader.receive(lambda t: None, timeout=5) == 1
            assert producer.await_outcomes(1, 1.5) == [], "the stalled consumer lives: it still holds its share"
            _kill(stalled, shm_env, "stalled")
            outcomes = producer.await_outcomes(1, 5)
            assert [(o.uuid_lsb, o.failure) for o in outcomes] == [(lsb, PARTIAL)]
            assert "stalled" in outcomes[0].detail and "reader" not in outcomes[0].detail
            assert producer.await_outcomes(1, 1.2) == [] and producer.in_flight_count() == 0
    finally:
        _kill(stalled, shm_env, "stalled")


def test_a_fan_out_whose_consumers_all_die_fails_consumer_died_once(shm_env):
    first, second = _start_idle(shm_env, "first"), _start_idle(shm_env, "second")
    try:
        with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
            lsb = producer.post(["first", "second"], "fan", np.zeros(4096, np.uint8))
            _kill(first, shm_env, "first")
            assert producer.await_outcomes(1, 1.5) == [], "one consumer still lives"
            _kill(second, shm_env, "second")
            outcomes = producer.await_outcomes(1, 5)
            assert [(o.uuid_lsb, o.failure) for o in outcomes] == [(lsb, CONSUMER_DIED)]
            assert "first" in outcomes[0].detail and "second" in outcomes[0].detail
            assert producer.await_outcomes(1, 1.2) == [] and producer.in_flight_count() == 0
    finally:
        _kill(first, shm_env, "first")
        _kill(second, shm_env, "second")


def test_a_fan_out_to_consumers_that_do_not_run_is_refused_at_once_and_one_that_runs_makes_it_partial(shm_env):
    with Endpoint.open(DEPLOYMENT, "reader", env=shm_env) as reader, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        refused = producer.post(["ghost-1", "ghost-2"], "nobody", np.zeros(64, np.uint8))
        outcomes = producer.poll_outcomes()
        assert [(o.uuid_lsb, o.failure) for o in outcomes] == [(refused, REFUSED)]
        assert "ghost-1" in outcomes[0].detail and "ghost-2" in outcomes[0].detail
        partial = producer.post(["ghost-1", "reader"], "half", np.zeros(64, np.uint8))
        assert producer.poll_outcomes() == [], "the reader's share is still to come"
        assert reader.receive(lambda t: None, timeout=5) == 1
        outcomes = producer.await_outcomes(1, 5)
        assert [(o.uuid_lsb, o.failure) for o in outcomes] == [(partial, PARTIAL)]
        assert "ghost-1" in outcomes[0].detail


def test_a_fan_out_names_distinct_entities_and_a_bad_one_frees_the_slot(shm_env):
    with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        warm = producer.claim("warm", "U8", (16,))  # makes the arena (held: its free bytes are measured below)
        free = _free_bytes(producer)
        for to, error in ((["b", "b"], ValueError), ([], ValueError), ({"b", "c"}, TypeError), (["b", 3], TypeError),
                          (["b", "../etc"], ValueError)):
            with pytest.raises(error):
                producer.post(to, "bad", np.zeros(4096, np.uint8))
        claim = producer.claim("bad-claim", "U8", (4096,))
        with pytest.raises(ValueError):
            producer.post(["b", "b"], claim)
        with pytest.raises(ValueError, match="posted already"):
            producer.post("b", claim)
        del claim
        time.sleep(0)
        assert producer.poll_outcomes() == [] and producer.in_flight_count() == 0
        assert _free_bytes(producer) == free, "every post that raised gave its slot back"
        del warm
