"""One worker's endpoint on the arena, as the JVM's TensorEndpoint: post tensors to entities and hear exactly one
outcome for each; receive tensors in place, read-only and zero-copy, ACKed when the handler returns or when a kept
tensor's lease closes. Not thread-safe: one thread uses an endpoint (outcomes are told on it)."""
from __future__ import annotations

import atexit
import os
import secrets
import signal
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from . import format as f
from .arena import Arena, Slot, stamp_holds
from .shm import Mailbox, PeerFiles, PeerMailbox, PeerUnavailableError, shm_dir

# The failure names of the JVM side's Delivery.Failure.
CONSUMER_DIED = "CONSUMER_DIED"
REFUSED = "REFUSED"
CLOSED = "CLOSED"

_NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64, "I8": np.int8,
          "U8": np.uint8, "I16": np.int16, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_,
          "F8_E4M3FN": np.uint8, "F8_E5M2": np.uint8, "F8_E4M3FNUZ": np.uint8, "F8_E5M2FNUZ": np.uint8}
_CODE_OF_NUMPY = {np.dtype(np.float32): 1, np.dtype(np.float16): 2, np.dtype(np.float64): 4,
                  np.dtype(np.int8): 5, np.dtype(np.uint8): 6, np.dtype(np.int16): 7, np.dtype(np.int32): 8,
                  np.dtype(np.int64): 9, np.dtype(np.bool_): 10}
_ACKS_PER_MESSAGE = 1024
_LIVENESS_INTERVAL_S = 1.0


@dataclass(frozen=True)
class Outcome:
    """What became of one posted tensor: failure None when delivered."""
    request_id: str
    uuid_msb: int
    uuid_lsb: int
    failure: Optional[str] = None
    detail: Optional[str] = None


class Listener:
    """Told each outcome exactly once, on the thread that uses the endpoint."""

    def delivered(self, request_id: str, uuid_msb: int, uuid_lsb: int) -> None:
        pass

    def failed(self, request_id: str, uuid_msb: int, uuid_lsb: int, failure: str, detail: str) -> None:
        pass


class Claim:
    """Room for one tensor in this process's arena: fill `array` in place, then `Endpoint.post(to, claim)`."""

    def __init__(self, request_id: str, dtype_code: int, shape, slot: Slot, msb: int, lsb: int):
        self.request_id, self.dtype_code, self.shape, self.slot = request_id, dtype_code, tuple(shape), slot
        self.uuid_msb, self.uuid_lsb = msb, lsb
        name = f.DTYPES[dtype_code][0]
        count = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        self.array = np.frombuffer(slot.file.map, dtype=_NUMPY[name], count=count, offset=slot.offset) \
            .reshape(self.shape) if slot.file.map is not None else np.zeros(self.shape, _NUMPY[name])


class Received:
    """A tensor handed to a handler: `array` is a read-only numpy view of the producer's bytes, in place."""

    def __init__(self, endpoint: "Endpoint", d: f.Descriptor, array: np.ndarray, mapping):
        self.descriptor = d
        self.array = array
        self._endpoint = endpoint
        self._mapping = mapping
        self._kept = False
        self._done = False

    @property
    def request_id(self) -> str:
        return self.descriptor.request_id

    @property
    def producer(self) -> str:
        return self.descriptor.producer

    def keep(self) -> "Received":
        """Keeps the tensor past the handler's return: its ACK goes when the returned lease closes (or `with`)."""
        self._kept = True
        return self

    def close(self):
        """Done with the bytes: checks the stamp again and ACKs (or refuses, if the slot was reused)."""
        if not self._done:
            self._done = True
            self._endpoint._finished(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Endpoint:
    """`with Endpoint.open(endpoint, entity, listener=...) as ep:` sends and receives for one entity."""

    def __init__(self, deployment: str, entity: str, listener: Optional[Listener], env):
        self.env = dict(os.environ if env is None else env)
        self.entity = f.check_entity(entity)
        self.ns = f.namespace(deployment, self.env.get("MSTAR_DEPLOYMENT_TOKEN"))
        self.directory = shm_dir(self.env)
        self.listener = listener
        self.mailbox = Mailbox(self.directory, self.ns, self.entity)
        self.arena: Optional[Arena] = None
        self.peers: Dict[str, PeerMailbox] = {}
        self.files = PeerFiles(self.directory)
        self.in_flight: Dict[Tuple[int, int], Tuple[str, str, Slot]] = {}  # uuid -> request id, consumer, slot
        self.outcomes: List[Outcome] = []
        self.pending_acks: Dict[str, List[Tuple[int, int]]] = {}
        self.pending_refusals: Dict[str, List[Tuple[int, int]]] = {}
        self.waiting: List[Tuple[str, f.Descriptor]] = []  # descriptors read while taking ACKs
        self.stats = {"received": 0, "acks_sent": 0, "stale_reads": 0, "bad_descriptors": 0, "acks": 0,
                      "unknown_acks": 0}
        self.next_liveness = time.monotonic() + _LIVENESS_INTERVAL_S
        self.closed = False
        self._reading = False
        # Test-only seams: the negative controls show that the stamp check and the liveness check are what work.
        self._no_stamp_check = self.env.get("MSTAR_TEST_NO_STAMP_CHECK") == "1"
        self._no_liveness = self.env.get("MSTAR_TEST_NO_LIVENESS") == "1"
        atexit.register(self.close)  # an endpoint left open is closed at exit, as the JVM's shutdown hook does

    @classmethod
    def open(cls, deployment: str, entity: str, listener: Optional[Listener] = None, env=None) -> "Endpoint":
        """Opens `entity`'s endpoint in the deployment named by `deployment` (its endpoint, with or without
        ipc://), reading MSTAR_SHM_* and MSTAR_DEPLOYMENT_TOKEN from `env` (os.environ by default). Where SIGTERM
        has Python's default action, it then raises SystemExit instead, so that the endpoint is closed (by its
        `with` block or at exit) and no file is left behind, as the JVM's shutdown hook does."""
        _exit_cleanly_on_sigterm()
        return cls(deployment, entity, listener, env)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- sending ----

    def _arena(self) -> Arena:
        if self.arena is None:
            self.arena = Arena(self.directory, self.ns, self.entity, self.env)
        return self.arena

    def claim(self, request_id: str, dtype: str, shape) -> Claim:
        """Room for a tensor of `dtype` (a format name such as "F32") and `shape` to fill in place."""
        self._check_open()
        code = f.DTYPE_CODES[dtype]
        nbytes = f.DTYPES[code][1] * int(np.prod(shape, dtype=np.int64)) if len(shape) else f.DTYPES[code][1]
        msb, lsb = _new_uuid()
        slot = self._arena().reserve(nbytes, msb, lsb, self._wait_for_frees)
        return Claim(request_id, code, shape, slot, msb, lsb)

    def post(self, to: str, request_id_or_claim, array=None) -> int:
        """Sends a tensor to `to`: a filled Claim, or a request id and any buffer-protocol array (numpy, a CPU
        torch tensor), copied once into a slot. Returns the low half of its uuid, which its outcome names."""
        self._check_open()
        if isinstance(request_id_or_claim, Claim):
            claim = request_id_or_claim
        else:
            source = np.ascontiguousarray(array.numpy() if hasattr(array, "numpy") else np.asarray(array))
            code = _CODE_OF_NUMPY.get(source.dtype)
            if code is None:
                raise TypeError(f"no format dtype for numpy dtype {source.dtype}: use claim() with a format name")
            claim = self.claim(request_id_or_claim, f.DTYPES[code][0], source.shape)
            if source.nbytes:
                claim.array[...] = source
        slot = claim.slot
        d = f.Descriptor(claim.uuid_msb, claim.uuid_lsb, claim.request_id, self.entity, claim.dtype_code,
                         claim.shape, slot.nbytes, f.PLACEMENT_SPILL if slot.spill else f.PLACEMENT_ARENA,
                         os.path.basename(slot.file.path), slot.offset)
        key = (claim.uuid_msb, claim.uuid_lsb)
        try:
            peer = self._peer(to)
            peer.write(f.DESCRIPTORS, f.encode_message(self.entity, 1, f.encode_descriptor(d)))
        except PeerUnavailableError as e:
            self._arena().free(slot, *key)
            self._tell(Outcome(claim.request_id, key[0], key[1], REFUSED, str(e)))
            return key[1]
        self.in_flight[key] = (claim.request_id, to, slot)
        return key[1]

    def _peer(self, entity: str) -> PeerMailbox:
        peer = self.peers.get(entity)
        now = time.monotonic()
        if peer is not None and now > peer.next_check:  # its owner's lock, probed at most once a second
            peer.next_check = now + _LIVENESS_INTERVAL_S
            if not peer.is_alive():
                del self.peers[entity]
                peer.close()
                peer = None
        if peer is None:
            peer = PeerMailbox(self.directory, self.ns, entity)
            self.peers[entity] = peer
        return peer

    def _wait_for_frees(self, seconds: float):
        self._read(seconds, handler=None)

    # ---- outcomes ----

    def poll_outcomes(self) -> List[Outcome]:
        """Reads what waits and returns the outcomes not told to a listener (all of them without one)."""
        self._read(0, handler=None)
        out, self.outcomes = self.outcomes, []
        return out

    def await_outcomes(self, count: int, timeout: float) -> List[Outcome]:
        """Waits until `count` outcomes (without a listener) or all in flight are decided, or the timeout."""
        deadline = time.monotonic() + timeout
        out: List[Outcome] = []
        while len(out) < count and time.monotonic() < deadline:
            out += self.poll_outcomes()
            if len(out) < count:
                self._read(min(0.05, max(0.0, deadline - time.monotonic())), handler=None)
        return out + self.poll_outcomes()

    def in_flight_count(self) -> int:
        return len(self.in_flight)

    def _tell(self, outcome: Outcome):
        if self.listener is None:
            self.outcomes.append(outcome)
        elif outcome.failure is None:
            self.listener.delivered(outcome.request_id, outcome.uuid_msb, outcome.uuid_lsb)
        else:
            self.listener.failed(outcome.request_id, outcome.uuid_msb, outcome.uuid_lsb, outcome.failure,
                                 outcome.detail)

    def _decide(self, key, failure: Optional[str], detail: Optional[str]):
        entry = self.in_flight.pop(key, None)
        if entry is None:
            return False
        request_id, _, slot = entry
        self._arena().free(slot, *key)
        self._tell(Outcome(request_id, key[0], key[1], failure, detail))
        return True

    def _check_liveness(self):
        now = time.monotonic()
        if now < self.next_liveness or not self.in_flight or self._no_liveness:
            return
        self.next_liveness = now + _LIVENESS_INTERVAL_S
        consumers = {consumer for _, consumer, _ in self.in_flight.values()}
        for consumer in consumers:
            peer = self.peers.get(consumer)
            if peer is None or not peer.is_alive():
                for key, (_, c, _) in list(self.in_flight.items()):
                    if c == consumer:
                        self._decide(key, CONSUMER_DIED, f"consumer {consumer} died before ACKing")

    # ---- receiving ----

    def receive(self, handler: Callable[[Received], None], timeout: float = 0.0, limit: int = 64) -> int:
        """Hands up to `limit` tensors to `handler`, waiting up to `timeout` seconds for the first; returns how many.
        Each tensor is ACKed when the handler returns, unless it called `keep()` (then when it is closed)."""
        self._check_open()
        return self._read(timeout, handler, limit)

    def _read(self, timeout: float, handler, limit: int = 64) -> int:
        self._reading = True
        try:
            return self._read_until(time.monotonic() + timeout, handler, limit, timeout)
        finally:
            self._reading = False
            self._flush_acks()

    def _read_until(self, deadline: float, handler, limit: int, timeout: float) -> int:
        """Reads until a handler was handed something (or, without a handler, until an outcome was decided), or the
        deadline passes; returns how many tensors were handed."""
        handed = 0
        while True:
            if handler is not None:
                while self.waiting and handed < limit:
                    sender, d = self.waiting.pop(0)
                    handed += self._hand(sender, d, handler)
            in_flight = len(self.in_flight)
            for mtype, body in self.mailbox.read(64):
                self._message(mtype, body)
            if handler is not None:
                while self.waiting and handed < limit:
                    sender, d = self.waiting.pop(0)
                    handed += self._hand(sender, d, handler)
            self._flush_acks()
            self._check_liveness()
            self.files.sweep()
            left = deadline - time.monotonic()
            decided = len(self.in_flight) < in_flight
            if handed or left <= 0 or (handler is None and (timeout == 0 or decided)):
                return handed
            if not self.mailbox.has_message():
                self.mailbox.sleep(min(left, 0.1))

    def _message(self, mtype: int, body: bytes):
        try:
            sender, items = f.decode_message(mtype, body, self.ns)
        except f.DescriptorFormatError:
            self.stats["bad_descriptors"] += 1
            return
        if mtype == f.DESCRIPTORS:
            for d in items:
                if isinstance(d, f.DescriptorFormatError):
                    self.stats["bad_descriptors"] += 1
                else:
                    self.waiting.append((sender, d))
            return
        for msb, lsb in items:
            entry = self.in_flight.get((msb, lsb))
            if entry is None or entry[1] != sender:
                self.stats["unknown_acks"] += 1
                continue
            self.stats["acks"] += 1
            if mtype == f.ACKS:
                self._decide((msb, lsb), None, None)
            else:
                self._decide((msb, lsb), REFUSED, f"consumer {sender} refused it: its slot was reused under it")

    def _hand(self, sender: str, d: f.Descriptor, handler) -> int:
        key = (d.uuid_msb, d.uuid_lsb)
        spill = d.placement == f.PLACEMENT_SPILL
        end = d.offset + d.nbytes if spill else f.stamp_at(d.offset, d.nbytes) + f.STAMP_BYTES
        try:
            mapping = self.files.mapping(d.file_name, end)
        except (OSError, f.DescriptorFormatError):
            self.stats["bad_descriptors"] += 1
            self._queue(self.pending_refusals, d.producer, key)  # never touched; its producer frees it
            return 0
        if not spill and not self._stamp_holds(mapping, d):
            self.stats["stale_reads"] += 1
            self._queue(self.pending_refusals, d.producer, key)
            return 0
        name = f.DTYPES[d.dtype][0]
        count = 1
        for dim in d.shape:
            count *= dim
        array = np.frombuffer(mapping, dtype=_NUMPY[name], count=count, offset=d.offset).reshape(d.shape) \
            if d.nbytes else np.zeros(d.shape, _NUMPY[name])
        array.flags.writeable = False
        tensor = Received(self, d, array, mapping)
        self.stats["received"] += 1
        try:
            handler(tensor)
        finally:
            if not tensor._kept:
                tensor.close()
        return 1

    def _stamp_holds(self, mapping, d: f.Descriptor) -> bool:
        return self._no_stamp_check or stamp_holds(mapping, d.offset, d.nbytes, d.uuid_msb, d.uuid_lsb)

    def _finished(self, tensor: Received):
        d = tensor.descriptor
        key = (d.uuid_msb, d.uuid_lsb)
        if d.placement == f.PLACEMENT_ARENA and not self._stamp_holds(tensor._mapping, d):
            self.stats["stale_reads"] += 1
            self._queue(self.pending_refusals, d.producer, key)
        else:
            self._queue(self.pending_acks, d.producer, key)
        tensor.array = None
        tensor._mapping = None
        if not self.closed and not self._reading:
            self._flush_acks()  # a kept tensor closed later; inside receive, one ACK message per batch

    @staticmethod
    def _queue(pending, producer, key):
        pending.setdefault(producer, []).append(key)

    def _flush_acks(self):
        for pending, mtype in ((self.pending_acks, f.ACKS), (self.pending_refusals, f.REFUSALS)):
            for producer, keys in list(pending.items()):
                del pending[producer]
                try:
                    peer = self._peer(producer)
                    for k in range(0, len(keys), _ACKS_PER_MESSAGE):
                        batch = keys[k:k + _ACKS_PER_MESSAGE]
                        peer.write(mtype, f.encode_message(self.entity, len(batch), f.encode_uuids(batch)))
                        self.stats["acks_sent"] += len(batch)
                except PeerUnavailableError:
                    pass  # the producer is gone: its files go with it

    # ---- closing ----

    def _check_open(self):
        if self.closed:
            raise RuntimeError(f"endpoint is closed: entity={self.entity}")

    def close(self):
        """Tells every tensor in flight CLOSED, sends the ACKs that wait, and removes every file of its own."""
        if self.closed:
            return
        atexit.unregister(self.close)
        self._flush_acks()
        self.closed = True
        for key in list(self.in_flight):
            self._decide(key, CLOSED, "the endpoint closed first")
        for peer in self.peers.values():
            peer.close()
        self.peers.clear()
        if self.arena is not None:
            self.arena.close()
        self.files.close()
        self.mailbox.close()


def _exit_cleanly_on_sigterm():
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _sigterm)


def _sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _new_uuid() -> Tuple[int, int]:
    """A random (version 4) uuid as two signed 64-bit halves, as the JVM's UUID holds them."""
    value = int.from_bytes(secrets.token_bytes(16), "big")
    value = (value & ~(0xF000 << 64)) | (0x4000 << 64)  # version 4
    value = (value & ~(0xC << 60)) | (0x8 << 60)  # the IETF variant
    msb, lsb = value >> 64, value & (2**64 - 1)
    return struct.unpack("<qq", struct.pack("<QQ", msb, lsb))
