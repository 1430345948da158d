"""A view can never show another tensor's bytes: a received array kept past its handler holds the producer's slot
(the ACK waits for the last view), `Received.array` refuses access after the handler, and a claim's array refuses
after its post while a view of it kept longer holds its slot from reuse."""
import gc
import warnings

import numpy as np
import pytest

from mstar_transport import Endpoint

DEPLOYMENT = "ipc:///tmp/mstar-python-views"


def _pair(shm_env):
    return Endpoint.open(DEPLOYMENT, "consumer", env=shm_env), Endpoint.open(DEPLOYMENT, "producer", env=shm_env)


def test_a_view_kept_past_its_handler_holds_the_ack_until_it_is_gone(shm_env):
    consumer, producer = _pair(shm_env)
    with consumer, producer:
        producer.post("consumer", "kept-view", np.arange(1024, dtype=np.int32))
        views, tensors = [], []

        def handle(tensor):
            views.append(tensor.array[10:20])  # a slice: it holds the slot like the array itself
            tensors.append(tensor)

        assert consumer.receive(handle, timeout=5) == 1
        with pytest.raises(RuntimeError, match="keep()"):
            tensors[0].array
        consumer.receive(lambda t: None, timeout=0)
        assert producer.await_outcomes(1, 0.5) == [], "no ACK while a view lives"
        assert views[0].tolist() == list(range(10, 20))
        views.clear()
        consumer.receive(lambda t: None, timeout=0)
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]


def test_a_torch_tensor_made_from_a_view_holds_the_ack(shm_env):
    torch = pytest.importorskip("torch", reason="no torch here (Debian's python3-torch provides a CPU one)")
    consumer, producer = _pair(shm_env)
    with consumer, producer:
        producer.post("consumer", "t", np.arange(8, dtype=np.float32))
        kept = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            consumer.receive(lambda t: kept.append(torch.from_numpy(t.array)), timeout=5)
        gc.collect()
        consumer.receive(lambda t: None, timeout=0)
        assert producer.await_outcomes(1, 0.5) == []
        assert float(kept[0].sum()) == 28.0
        kept.clear()
        consumer.receive(lambda t: None, timeout=0)
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]


def test_a_claims_array_refuses_after_post_and_a_view_kept_holds_its_slot(shm_env):
    consumer, producer = _pair(shm_env)
    with consumer, producer:
        claim = producer.claim("c", "U8", (4096,))
        view = claim.array
        view[...] = 7
        producer.post("consumer", claim)
        with pytest.raises(RuntimeError, match="posted"):
            claim.array
        consumer.receive(lambda t: None, timeout=5)
        assert [o.failure for o in producer.await_outcomes(1, 5)] == [None]
        offset = claim.slot.offset
        other = producer.claim("d", "U8", (4096,))
        assert other.slot.offset != offset, "the slot waits for the claim's last view"
        del view
        producer.poll_outcomes()
        del other
        producer.poll_outcomes()
        again = producer.claim("e", "U8", (4096,))
        assert again.slot.offset == offset, "then it is free again"
