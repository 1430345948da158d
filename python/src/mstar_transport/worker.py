"""A worker for cross-language runs and the README's example: `python -m mstar_transport.worker consume ENDPOINT
ENTITY COUNT` receives COUNT tensors and checks every word; `... produce ENDPOINT ENTITY TO COUNT SEED` posts
COUNT checked tensors of seeded sizes and waits for every outcome; `... echo ENDPOINT ENTITY TO COUNT` posts each of
COUNT received tensors back to TO as it came. Each prints one RESULT line. Every tensor's word
k holds seq * 0x9E3779B97F4A7C15 + k (mod 2**64), as the JVM side's PythonPeer writes and checks them."""
from __future__ import annotations

import random
import sys
import time

import numpy as np

from .endpoint import Endpoint

GOLDEN = 0x9E3779B97F4A7C15
SIZES = (4096, 65536, 1 << 20, 16 << 20)
WEIGHTS = (9700, 290, 9, 1)
PROGRESS_AT = 1000


def words(seq: int, nbytes: int) -> np.ndarray:
    base = np.uint64((seq * GOLDEN) & (2**64 - 1))
    return np.arange(nbytes // 8, dtype=np.uint64) + base


def size_of(rng: random.Random) -> int:
    return rng.choices(SIZES, WEIGHTS)[0]


def consume(endpoint: str, entity: str, count: int) -> int:
    checked = bad = 0
    first_address = None

    def check(tensor):
        nonlocal checked, bad, first_address
        seq = int(tensor.request_id)
        data = tensor.array.view(np.uint64) if tensor.array.nbytes else tensor.array
        if first_address is None:
            first_address = tensor.array.ctypes.data
        if tensor.array.nbytes % 8 or not np.array_equal(data, words(seq, tensor.array.nbytes)):
            bad += 1
        checked += 1
        if checked == PROGRESS_AT:
            print("PROGRESS", flush=True)  # a test that kills this consumer mid-stream waits for it

    with Endpoint.open(endpoint, entity) as ep:
        print("READY", flush=True)
        deadline = time.monotonic() + 600
        while checked < count and time.monotonic() < deadline:
            ep.receive(check, timeout=0.5, limit=256)
        stats = ep.stats
    print(f"RESULT received={checked} bad={bad} staleReads={stats['stale_reads']} badDescriptors="
          f"{stats['bad_descriptors']} firstAddress={first_address}", flush=True)
    return 0 if checked == count and bad == 0 else 1


def produce(endpoint: str, entity: str, to: str, count: int, seed: int, window: int = 64) -> int:
    rng = random.Random(seed)
    delivered = failed = 0
    failures = {}
    with Endpoint.open(endpoint, entity) as ep:
        print("READY", flush=True)
        sent = 0
        while delivered + failed < count:
            while sent < count and ep.in_flight_count() < window:
                nbytes = size_of(rng)
                claim = ep.claim(str(sent), "U8", (nbytes,))
                claim.array.view(np.uint64)[...] = words(sent, nbytes)
                ep.post(to, claim)
                sent += 1
            for outcome in ep.await_outcomes(1, 1.0):
                if outcome.failure is None:
                    delivered += 1
                else:
                    failed += 1
                    failures[outcome.failure] = failures.get(outcome.failure, 0) + 1
    print(f"RESULT delivered={delivered} failed={failed} failures={failures}", flush=True)
    return 0 if delivered == count else 1


def blast(endpoint: str, entity: str, to: str, size: int, seconds: float, window: int = 64) -> int:
    """Posts tensors of `size` bytes (claim, write the sequence number, post) for `seconds`; prints the rate."""
    with Endpoint.open(endpoint, entity) as ep:
        print("READY", flush=True)
        sent = 0
        start = time.monotonic()
        end = start + seconds
        while time.monotonic() < end:
            while ep.in_flight_count() >= window:
                ep.await_outcomes(1, 0.1)
            claim = ep.claim("t", "U8", (size,))
            claim.array[:8].view(np.uint64)[0] = sent
            ep.post(to, claim)
            sent += 1
        while ep.in_flight_count():
            ep.await_outcomes(1, 0.1)
        elapsed = time.monotonic() - start
        ep.post(to, ep.claim("end", "U8", (8,)))
        ep.await_outcomes(1, 10)
    print(f"RESULT tensors={sent} seconds={elapsed:.3f} perSecond={sent / elapsed:.0f} "
          f"gbps={sent * size / elapsed / 1e9:.3f}", flush=True)
    return 0


def drain(endpoint: str, entity: str) -> int:
    """Sums every word of each tensor in place until one named "end"; prints the first view's address."""
    state = {"sum": 0, "tensors": 0, "done": False, "address": None}

    def handle(tensor):
        if tensor.request_id == "end":
            state["done"] = True
            return
        if state["address"] is None:
            state["address"] = tensor.array.ctypes.data
        state["sum"] += int(tensor.array.view(np.uint64).sum(dtype=np.uint64))
        state["tensors"] += 1

    with Endpoint.open(endpoint, entity) as ep:
        print("READY", flush=True)
        while not state["done"]:
            ep.receive(handle, timeout=0.5, limit=256)
    print(f"RESULT tensors={state['tensors']} firstAddress={state['address']}", flush=True)
    return 0


def echo(endpoint: str, entity: str, to: str, count: int) -> int:
    """Posts each of COUNT received tensors back to `to` as it came: request id, format dtype, shape and bytes."""
    received = []

    def keep(tensor):
        received.append((tensor.request_id, tensor.dtype, np.array(tensor.array)))  # a copy: the view ends here

    with Endpoint.open(endpoint, entity) as ep:
        print("READY", flush=True)
        deadline = time.monotonic() + 120
        while len(received) < count and time.monotonic() < deadline:
            ep.receive(keep, timeout=0.5)
        for request_id, dtype, array in received:
            ep.post(to, request_id, array, dtype=dtype)
        outcomes = ep.await_outcomes(len(received), 60)
    shapes = " ".join(f"{request_id}:{dtype}{list(array.shape)}" for request_id, dtype, array in received)
    print(f"RESULT echoed={len(received)} told={len(outcomes)} {shapes}", flush=True)
    return 0 if len(received) == count else 1


def main(argv) -> int:
    if argv[:1] == ["consume"] and len(argv) == 4:
        return consume(argv[1], argv[2], int(argv[3]))
    if argv[:1] == ["produce"] and len(argv) == 6:
        return produce(argv[1], argv[2], argv[3], int(argv[4]), int(argv[5]))
    if argv[:1] == ["blast"] and len(argv) == 6:
        return blast(argv[1], argv[2], argv[3], int(argv[4]), float(argv[5]))
    if argv[:1] == ["echo"] and len(argv) == 5:
        return echo(argv[1], argv[2], argv[3], int(argv[4]))
    if argv[:1] == ["drain"] and len(argv) == 3:
        return drain(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
