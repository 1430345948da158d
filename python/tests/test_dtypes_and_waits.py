"""Every dtype and shape the format names round-trips (0-d, BF16, the 8-bit floats; torch tensors of any dtype,
grad or not); await_peer waits for a peer that starts later; asyncio waits with wait_async."""
import asyncio
import threading
import time

import numpy as np
import pytest

from mstar_transport import Endpoint
from mstar_transport import format as f

DEPLOYMENT = "ipc:///tmp/mstar-python-dtypes"


def _round_trip(shm_env, post):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        count = post(producer)
        got = []
        while len(got) < count:
            assert consumer.receive(lambda t: got.append((t.request_id, f.DTYPES[t.descriptor.dtype][0], t.array.copy())), timeout=5)
        assert {o.failure for o in producer.await_outcomes(count, 5)} == {None}
        return {rid: (dtype, array) for rid, dtype, array in got}


def test_a_0d_tensor_round_trips_with_shape_empty(shm_env):
    got = _round_trip(shm_env, lambda p: [p.post("consumer", "scalar", np.float64(2.5)),
                                          p.post("consumer", "empty", np.zeros((3, 0), np.int32))] and 2)
    assert got["scalar"][0] == "F64" and got["scalar"][1].shape == () and got["scalar"][1] == 2.5
    assert got["empty"][1].shape == (3, 0)


def test_bf16_and_the_8_bit_floats_round_trip_as_their_bits(shm_env):
    bits = np.array([16320, 16384, -16320], np.int16)  # 1.5, 2.0, -3.0 in bfloat16
    fp8 = np.arange(8, dtype=np.uint8)

    def post(p):
        p.post("consumer", "bf16", bits, dtype="BF16")
        for name in ("F8_E4M3FN", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"):
            p.post("consumer", name, fp8, dtype=name)
        return 5

    got = _round_trip(shm_env, post)
    assert got["bf16"][0] == "BF16" and got["bf16"][1].dtype == np.int16
    np.testing.assert_array_equal(got["bf16"][1], bits)
    for name in ("F8_E4M3FN", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"):
        assert got[name][0] == name
        np.testing.assert_array_equal(got[name][1], fp8)


def test_torch_tensors_of_any_dtype_round_trip_and_grad_is_detached(shm_env):
    torch = pytest.importorskip("torch", reason="no torch here (Debian's python3-torch provides a CPU one)")
    sent = {"bf16": torch.tensor([[1.5, 2.0], [-3.0, 0.25]], dtype=torch.bfloat16),
            "grad": torch.arange(6, dtype=torch.float32).reshape(2, 3).requires_grad_(),
            "scalar": torch.tensor(7, dtype=torch.int64),
            "strided": torch.arange(12, dtype=torch.int16).reshape(3, 4).t()}
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        for rid, t in sent.items():
            producer.post("consumer", rid, t)
        got = {}
        while len(got) < len(sent):
            consumer.receive(lambda t: got.update({t.request_id: t.torch().clone()}), timeout=5)
        assert {o.failure for o in producer.await_outcomes(len(sent), 5)} == {None}
    for rid, t in sent.items():
        assert got[rid].dtype == t.dtype and got[rid].shape == t.shape
        assert torch.equal(got[rid], t.detach())
    assert not got["grad"].requires_grad


def test_await_peer_waits_for_a_peer_that_starts_later(shm_env):
    with Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        assert producer.await_peer("never", 0.2) is False
        opened = []
        late = threading.Timer(0.3, lambda: opened.append(Endpoint.open(DEPLOYMENT, "late", env=shm_env)))
        late.start()
        try:
            start = time.monotonic()
            assert producer.await_peer("late", 10) is True
            assert time.monotonic() - start < 5
        finally:
            late.join()
            for endpoint in opened:
                endpoint.close()


def test_wait_async_lets_an_event_loop_receive(shm_env):
    with Endpoint.open(DEPLOYMENT, "consumer", env=shm_env) as consumer, \
            Endpoint.open(DEPLOYMENT, "producer", env=shm_env) as producer:
        async def main():
            waiting = asyncio.ensure_future(consumer.wait_async(10))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            producer.post("consumer", "x", np.zeros(4, np.uint8))
            assert await asyncio.wait_for(waiting, 5) is True
            got = []
            consumer.receive(lambda t: got.append(t.request_id))
            assert await consumer.wait_async(0.1) is False
            return got

        assert asyncio.run(main()) == ["x"]
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]
