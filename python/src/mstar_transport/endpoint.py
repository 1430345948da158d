"""One worker's endpoint on the arena, as the JVM's TensorEndpoint: post tensors to entities and hear exactly one
outcome for each; receive tensors in place, read-only and zero-copy, ACKed once the handler returned and the last
view of the tensor is gone. Format 2 (docs/format.md, section 12a): a tensor posted to one consumer carries the
POSITION flag and is told by the consumer's handled position instead of an ACK, unless kept past its handler (a
kept message, then its ACK) or refused (its refusal, written before the position passes it).

Threads: an endpoint may be used from several threads. One lock guards its state (the tensors in flight, the rings
it reads and writes, the ACKs it owes); handlers and listeners run outside it. Outcomes are told one at a time,
never re-entrantly: a listener that posts or closes has its own outcomes told after it returns, by the same loop.
After fork() an endpoint belongs to the parent: the child's copy refuses every call and leaves the parent's files
and locks alone."""
from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import secrets
import signal
import struct
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from . import format as f
from .arena import Arena, SegmentShrunkError, Slot, stamp_holds
from .lease import lend
from .shm import (Mailbox, MailboxVersionError, PeerFiles, PeerMailbox, PeerUnavailableError, UntrustedFileError,
                  owner_is_dead, shm_dir, sweep)
from .stats import StatsFile

_LOG = logging.getLogger(__name__)

# The failure names of the JVM side's Delivery.Failure.
CONSUMER_DIED = "CONSUMER_DIED"
REFUSED = "REFUSED"
CLOSED = "CLOSED"
# Not a definite failure: a fan-out's tensor that some consumers ACKed while the others never will have it (they did
# not run, died or refused it); the detail names those. Post it again to those only.
PARTIAL = "PARTIAL"

# How each format dtype is held in numpy: BF16 and the 8-bit floats as their bits (numpy has no such types); BF16 as
# int16, which torch 1.13's from_numpy takes (it refuses uint16).
_NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": np.int16, "F64": np.float64, "I8": np.int8,
          "U8": np.uint8, "I16": np.int16, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_,
          "F8_E4M3FN": np.uint8, "F8_E5M2": np.uint8, "F8_E4M3FNUZ": np.uint8, "F8_E5M2FNUZ": np.uint8}
_CODE_OF_NUMPY = {np.dtype(np.float32): 1, np.dtype(np.float16): 2, np.dtype(np.float64): 4,
                  np.dtype(np.int8): 5, np.dtype(np.uint8): 6, np.dtype(np.int16): 7, np.dtype(np.int32): 8,
                  np.dtype(np.int64): 9, np.dtype(np.bool_): 10}
_TORCH_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64", "I8": "int8",
                "U8": "uint8", "I16": "int16", "I32": "int32", "I64": "int64", "BOOL": "bool",
                "F8_E4M3FN": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "F8_E4M3FNUZ": "float8_e4m3fnuz",
                "F8_E5M2FNUZ": "float8_e5m2fnuz"}
_ACKS_PER_MESSAGE = 1024
_LIVENESS_INTERVAL_S = 1.0
_FULL_RING_TIMEOUT_S = 30.0  # a post waits this long for room in a live consumer's mailbox, then is REFUSED
_CLOSE_WAITS_FOR_HANDLERS_S = 5.0  # a close from another thread waits this long for handlers running now
_MAX_SLEEP_S = 1.0  # every wait wakes at least this often: liveness, views let go on other threads
_COPY_ATTEMPTS = 3  # a post of an array whose slot's segment was shrunk under it copies again into another

_ENDPOINTS: "weakref.WeakSet[Endpoint]" = weakref.WeakSet()


@dataclass(frozen=True)
class Outcome:
    """What became of one posted tensor: failure None when delivered."""
    request_id: str
    uuid_msb: int
    uuid_lsb: int
    failure: Optional[str] = None
    detail: Optional[str] = None


class Listener:
    """Told each outcome exactly once, one at a time, on a thread that calls the endpoint (receive, poll_outcomes,
    await_outcomes, post, claim or close). May call the endpoint (post, claim, close). May raise: the outcomes
    after it are still told, and the first exception is raised out of that call once they all were."""

    def delivered(self, request_id: str, uuid_msb: int, uuid_lsb: int) -> None:
        pass

    def failed(self, request_id: str, uuid_msb: int, uuid_lsb: int, failure: str, detail: str) -> None:
        pass


class Claim:
    """Room for one tensor in this process's arena: fill `array` in place, then `Endpoint.post(to, claim)`, once.
    After the post `array` refuses access; a view of it kept longer holds the slot from reuse until it is gone."""

    def __init__(self, endpoint: "Endpoint", request_id: str, dtype_code: int, shape, slot: Slot, msb: int,
                 lsb: int, array: np.ndarray):
        self.request_id, self.dtype_code, self.shape, self.slot = request_id, dtype_code, tuple(shape), slot
        self.uuid_msb, self.uuid_lsb = msb, lsb
        self.posted = False
        self._endpoint = endpoint
        self._array = array

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            raise RuntimeError(f"the claim was posted: its slot is no longer the writer's: request_id={self.request_id}")
        return self._array

    def torch(self):
        """`array` as a torch tensor of the claim's dtype (bf16 and 8-bit floats where torch has them)."""
        return _as_torch(self.array, self.dtype_code)


class Received:
    """A tensor handed to a handler: `array` is a read-only numpy view of the producer's bytes, in place.

    The tensor is ACKed once its handler returned (or, after `keep()`, once it is closed) and no array made from it
    is left: a view kept longer holds the producer's slot, so it can never show another tensor's bytes. `array`
    itself refuses access after that point."""

    def __init__(self, endpoint: "Endpoint", d: f.Descriptor, array: np.ndarray, on_let_go):
        self.descriptor = d
        self._array = array
        self._endpoint = endpoint
        self._on_let_go = on_let_go  # a zero-byte tensor has no lease: its ACK goes when it is let go
        self._kept = False

    @property
    def request_id(self) -> str:
        return self.descriptor.request_id

    @property
    def producer(self) -> str:
        return self.descriptor.producer

    @property
    def dtype(self) -> str:
        """The format's name of the dtype (BF16 and the 8-bit floats arrive in numpy as their bits)."""
        return f.DTYPES[self.descriptor.dtype][0]

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            raise RuntimeError(f"the tensor was handed back when its handler returned (or it was closed): call keep()"
                               f" in the handler to read it later: request_id={self.request_id}")
        return self._array

    def torch(self):
        """The tensor as a read-only-by-contract torch tensor of its dtype, sharing the bytes (bf16 and the 8-bit
        floats where torch has them, their bits otherwise). It holds the slot like any view; never write to it."""
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # torch has no read-only tensors and says so
            return _as_torch(self.array, self.descriptor.dtype)

    def keep(self) -> "Received":
        """Keeps the tensor past the handler's return: its ACK waits for `close()` (or the end of `with`)."""
        self._kept = True
        return self

    def close(self):
        """Done with the bytes: once no view is left, the stamp is checked again and the tensor ACKed (or refused)."""
        self._let_go()
        self._endpoint._after_let_go()

    def _let_go(self):
        self._array = None
        on_let_go, self._on_let_go = self._on_let_go, None
        if on_let_go is not None:
            on_let_go()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Sent:
    """A tensor in flight and where it lies, with a share for each consumer it went to (one, or a fan-out's): the
    consumers yet to ACK, each with the incarnation its descriptor went to (None before it went; liveness is per
    incarnation, as the JVM keys shares), how many ACKed, and which failed and why. Decided when no share is left.
    A post to one consumer goes with the POSITION flag: its consumer's handled position passing it decides it."""
    __slots__ = ("request_id", "shares", "acked", "failed", "slot", "position", "kept")

    def __init__(self, request_id, consumers, slot):
        self.request_id, self.slot = request_id, slot
        self.position: Optional[int] = None  # a POSITION post's end position in its consumer's ring (section 12a)
        self.kept = False  # its consumer said it keeps the bytes: an ACK or refusal decides it, not the position
        self.shares: Dict[str, Optional[int]] = dict.fromkeys(consumers)
        self.acked = 0
        self.failed: List[Tuple[str, str, str]] = []  # (entity, failure, detail)


class _Message:
    """A message read from this endpoint's ring (docs/format.md, section 12a): the handled position may pass its end
    once each of its records was handled and each kept message or refusal they owed was written (`owed`); the
    producers of its POSITION records then have their doorbells rung."""
    __slots__ = ("end", "records", "owed", "producers")

    def __init__(self, end: int):
        self.end, self.records, self.owed = end, 0, 0
        self.producers: Optional[set] = None


class _Handing:
    """A record handed (or about to be handed) to a handler: its descriptor, its message, and where its bytes stand:
    "handing" until the handler returned; then "released" if the last view went by then, else "kept" (a POSITION
    record's kept message is owed before the position passes it; its ACK or refusal follows when the views go)."""
    __slots__ = ("d", "message", "state")

    def __init__(self, d: f.Descriptor, message: _Message):
        self.d, self.message, self.state = d, message, "handing"


class Endpoint:
    """`with Endpoint.open(endpoint, entity, listener=...) as ep:` sends and receives for one entity."""

    def __init__(self, deployment: str, entity: str, listener: Optional[Listener], env):
        self.env = dict(os.environ if env is None else env)
        self.entity = f.check_entity(entity)
        self.ns = f.namespace(deployment, self.env.get("MSTAR_DEPLOYMENT_TOKEN"))
        self.directory = shm_dir(self.env)
        self.listener = listener
        self.sweep_interval_s = _seconds(self.env, "MSTAR_SHM_RECLAIM_INTERVAL_S", "30")
        self._lock = threading.RLock()
        self._local = threading.local()
        self._forked = False
        self._pid = os.getpid()
        self.closed = False
        self._close_requested = False
        self._handlers_running = 0  # on any thread: a close from another thread waits for them (bounded)
        self._handlers_done = threading.Condition(self._lock)
        self.stats = {"received": 0, "acks_sent": 0, "kept_sent": 0, "stale_reads": 0, "bad_descriptors": 0,
                      "acks": 0, "kept": 0, "by_position": 0, "unknown_acks": 0, "refused_files": 0,
                      "unreachable_peers": 0, "swept_files": 0, "skipped_claims": 0, "retired_segments": 0}
        self.stats["swept_files"] += sweep(self.directory)  # dead owners' files, before making ours
        self.next_sweep = time.monotonic() + self.sweep_interval_s
        self.mailbox = Mailbox(self.directory, self.ns, self.entity)
        publish = self.env.get("MSTAR_SHM_STATS_PUBLISH", "1").strip().lower() not in ("0", "false")
        self._stats_file = StatsFile(self.directory, self.ns, self.entity) if publish else None
        self.arena: Optional[Arena] = None
        self.peers: Dict[str, PeerMailbox] = {}
        self.files = PeerFiles(self.directory)
        self.in_flight: Dict[Tuple[int, int], _Sent] = {}
        self._claims: Dict[Tuple[int, int], list] = {}  # uuid -> [slot, viewed, state]: when to free a slot
        self.outcomes: List[Outcome] = []  # decided, for poll_outcomes (without a listener)
        self._to_tell: collections.deque = collections.deque()  # decided, for the listener
        self._telling = False
        self._decided = 0  # outcomes decided so far
        self._told = 0  # outcomes told to the listener so far
        self._events = 0  # anything a waiting thread may want: a message read, an outcome decided or told
        self._sleepers = 0
        # Messages owed to producers, each item (uuid, the _Message whose position waits for it, or None).
        self.pending_acks: Dict[str, List[Tuple[Tuple[int, int], Optional[_Message]]]] = {}
        self.pending_refusals: Dict[str, List[Tuple[Tuple[int, int], Optional[_Message]]]] = {}
        self.pending_kept: Dict[str, List[Tuple[Tuple[int, int], Optional[_Message]]]] = {}
        self.waiting: collections.deque = collections.deque()  # (sender, _Handing) read, not yet handed
        self._released: collections.deque = collections.deque()  # leases whose last view went (any thread)
        # The handled position (section 12a): the messages read and not yet passed, in ring order; the end of the
        # last one passed; the producers whose POSITION records it passed since their doorbells were rung.
        self._unpassed: collections.deque = collections.deque()
        self._passable = self.mailbox.handled
        self._to_ring: set = set()
        # A producer's POSITION posts (section 12a): (consumer, incarnation) -> deque of (end position, uuid), in
        # ring order; and the handled position of each such consumer that was looked at last.
        self._positions: Dict[Tuple[str, int], collections.deque] = {}
        self._seen_handled: Dict[Tuple[str, int], int] = {}
        self.next_liveness = time.monotonic() + _LIVENESS_INTERVAL_S
        # Test-only seams: the negative controls show that the stamp check and the liveness check are what work.
        self._no_stamp_check = self.env.get("MSTAR_TEST_NO_STAMP_CHECK") == "1"
        self._no_liveness = self.env.get("MSTAR_TEST_NO_LIVENESS") == "1"
        self._by_position = self.env.get("MSTAR_TEST_NO_POSITION") != "1"  # off: every post is ACKed by message
        _ENDPOINTS.add(self)
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
        """Room for a tensor of `dtype` (a format name such as "F32") and `shape` to fill in place. A full arena
        waits MSTAR_SHM_ARENA_FULL_TIMEOUT_S for ACKs, then spills to a file of its own."""
        self._check_open()
        if dtype not in f.DTYPE_CODES:
            raise ValueError(f"unknown dtype: dtype={dtype!r}, accepted: {', '.join(f.DTYPE_CODES)}")
        code = f.DTYPE_CODES[dtype]
        shape = tuple(int(d) for d in shape)
        if len(shape) > f.MAX_RANK or any(d < 0 for d in shape):
            raise ValueError(f"shape must have at most {f.MAX_RANK} dimensions, none negative: shape={shape}")
        nbytes = f.DTYPES[code][1]
        for d in shape:
            nbytes *= d
        msb, lsb = _new_uuid()
        deadline = None
        while True:
            with self._lock:
                self._check_open()
                slot = self._arena().take(nbytes, msb, lsb)
                if slot is None and deadline is not None and time.monotonic() >= deadline:
                    slot = self._arena().spill(nbytes, msb, lsb)
                if slot is not None:
                    return self._claim_of(request_id, code, shape, slot, msb, lsb)
            if deadline is None:
                deadline = time.monotonic() + self._arena().full_timeout_s
            since, _ = self._pass(None, 0)  # ACKs free slots
            self._tell()
            self._sleep(since, 0.01, False)

    def _claim_of(self, request_id, code, shape, slot: Slot, msb, lsb) -> Claim:
        key = (msb, lsb)
        dtype = _NUMPY[f.DTYPES[code][0]]
        if slot.file.map is None:  # an empty spill file: nothing to map
            self._claims[key] = [slot, False, "claimed"]
            return Claim(self, request_id, code, shape, slot, msb, lsb, np.zeros(shape, dtype))
        self._claims[key] = [slot, True, "claimed"]
        array = lend(slot.file.hold(), slot.address, dtype, shape, True,
                     lambda hold: self._released.append((key, None)))
        return Claim(self, request_id, code, shape, slot, msb, lsb, array)

    def post(self, to, request_id_or_claim, array=None, dtype: Optional[str] = None) -> int:
        """Sends a tensor to `to`, an entity or a list (or tuple) of entities (a fan-out: one slot, the same
        descriptor to each; the slot is freed once each ACKed or died): a filled Claim, or a request id and an array,
        copied once into a slot. The array may be numpy (any buffer-protocol array; `dtype` names a format dtype for
        raw bits, e.g. "BF16" for int16 bits) or a torch tensor of any dtype and device (one copy, straight into the
        slot; a tensor that requires grad is detached: its values are sent). Returns the low half of its uuid, which
        its outcome names.

        Exactly one outcome follows a post that returned: delivered when every consumer ACKed it; for a fan-out
        some of whose consumers ACKed it while the others did not run, died or refused it, PARTIAL (not definite:
        post it again to those the detail names); else the failure of the first that failed (an entity that does
        not run is REFUSED at once). A post that raised tells none and frees its slot, save one interrupted
        (KeyboardInterrupt) after some consumers of a fan-out got it: their outcome is told, the rest refused.

        A claim whose segment was truncated under it (by another process of this user) is told REFUSED; an array is
        copied again into another segment. The library's own copies never fault (SegmentShrunkError where no
        segment is left to take them); writes of the caller's into `Claim.array` after its segment was truncated
        would (SIGBUS): the check comes at `claim` and at `post`, not between."""
        self._check_open()
        if isinstance(request_id_or_claim, Claim):
            claim = request_id_or_claim
            if claim._endpoint is not self:
                raise ValueError(f"the claim belongs to another endpoint: request_id={claim.request_id}")
            return self._post(to, claim, False)
        for attempt in range(_COPY_ATTEMPTS):
            claim = self._copied(request_id_or_claim, array, dtype, attempt + 1 < _COPY_ATTEMPTS)
            if claim is not None:
                lsb = self._post(to, claim, attempt + 1 < _COPY_ATTEMPTS)
                if lsb is not None:
                    return lsb
        raise AssertionError("unreachable: the last attempt raises or posts")

    def _post(self, to, claim: Claim, again: bool) -> Optional[int]:
        """Posts a claim; None (its slot freed) when its segment was shrunk under it and `again` says the caller
        copies the tensor again into another slot."""
        key = (claim.uuid_msb, claim.uuid_lsb)
        with self._lock:
            self._check_open()
            if claim.posted:
                raise ValueError(f"the claim was posted already (a claim is posted once): "
                                 f"request_id={claim.request_id}")
            claim.posted = True
            claim._array = None
            slot = claim.slot
            try:
                targets = _targets(to)
            except BaseException:
                self._slot_done(key)
                raise
            if not self._arena().holds(slot):  # shrunk under it: the descriptor would name bytes that are gone
                if again:
                    self._slot_done(key)
                    return None
                self.in_flight[key] = _Sent(claim.request_id, (), slot)
                self._claims[key][2] = "posted"
                self._decide(key, REFUSED, f"the producer's segment was shrunk under the slot (a process of this user"
                                           f" truncated it): file={os.path.basename(slot.file.path)}; the bytes are"
                                           f" lost: post again")
            else:
                self._send(key, claim, slot, targets)
                self._settle_positions()
        try:
            self._tell()
        except Exception:  # the post is made and its outcome follows: a listener's error must not say it failed
            _LOG.warning("a listener raised while outcomes were told after a post; the rest were told", exc_info=True)
        return key[1]

    def _send(self, key, claim: Claim, slot: Slot, targets: List[str]):
        """Writes the descriptor into each target's mailbox (the lock held). A target that does not run (or whose
        mailbox stays full) gives up its share at once; an exception before any descriptor went untracks the tensor
        and frees its slot; after, the targets not reached give up their shares and the post stands. A post to one
        consumer carries the POSITION flag (section 12a): its record's end position in the consumer's ring is
        remembered, and the consumer's handled position passing it decides it; a fan-out is ACKed by message."""
        by_position = self._by_position and len(targets) == 1
        d = f.Descriptor(claim.uuid_msb, claim.uuid_lsb, claim.request_id, self.entity, claim.dtype_code,
                         claim.shape, slot.nbytes, f.PLACEMENT_SPILL if slot.spill else f.PLACEMENT_ARENA,
                         os.path.basename(slot.file.path), slot.offset, f.FLAG_POSITION if by_position else 0)
        went = 0
        k = 0
        try:
            message = f.encode_message(self.entity, 1, f.encode_descriptor(d))
            sent = _Sent(claim.request_id, targets, slot)
            self.in_flight[key] = sent  # before the writes: an ACK may come back while the next one waits for room
            self._claims[key][2] = "posted"
            for k, to in enumerate(targets):
                try:
                    peer = self._peer(to)
                    sent.shares[to] = peer.incarnation
                    if not peer.write(f.DESCRIPTORS, message, _FULL_RING_TIMEOUT_S, self._drain):
                        raise PeerUnavailableError(to, f"the mailbox of entity {to} stayed full for"
                                                       f" {_FULL_RING_TIMEOUT_S} s (it does not read)")
                    went += 1
                    if by_position and key in self.in_flight:  # (not refused while the write waited for room)
                        sent.position = peer.last_end
                        remembered = self._positions.get((to, peer.incarnation))
                        if remembered is None:
                            remembered = self._positions[(to, peer.incarnation)] = collections.deque()
                        remembered.append((peer.last_end, key))
                except PeerUnavailableError as e:
                    self._share_done(key, to, REFUSED, str(e))
        except BaseException as e:
            if went == 0:
                self.in_flight.pop(key, None)
                self._slot_done(key)
                raise
            for to in targets[k:]:
                self._share_done(key, to, REFUSED, f"consumer {to} was not sent it: {e!r}")
            if not isinstance(e, Exception):
                raise

    def _copied(self, request_id: str, array, dtype: Optional[str], again: bool) -> Optional[Claim]:
        """A claim holding a copy of `array` (numpy or torch); None (the slot freed) when the copy faulted because
        the slot's segment was shrunk under it and `again` says the caller tries another slot."""
        if type(array).__module__.split(".")[0] == "torch":
            t = array.detach()
            names = {v: k for k, v in _TORCH_NAMES.items()}
            name = names.get(str(t.dtype).replace("torch.", ""))
            if name is None:
                raise TypeError(f"no format dtype for torch dtype {t.dtype}")
            claim = self.claim(request_id, name, tuple(t.shape))
            if t.numel():
                if t.device.type == "cpu":
                    t = t.contiguous()
                    return self._copy_into(claim, t.data_ptr(), t.numel() * t.element_size(), t, again)
                claim.torch().copy_(t)  # a device's copy: unguarded (see post)
            return claim
        source = np.asarray(array, order="C")  # keeps a 0-d array 0-d
        if dtype is not None:
            if dtype not in f.DTYPE_CODES or np.dtype(_NUMPY[dtype]).itemsize != source.dtype.itemsize:
                raise ValueError(f"dtype {dtype!r} does not fit an array of {source.dtype}")
            name = dtype
        else:
            code = _CODE_OF_NUMPY.get(source.dtype)
            if code is None:
                raise TypeError(f"no format dtype for numpy dtype {source.dtype}: pass dtype= (a format name)")
            name = f.DTYPES[code][0]
        claim = self.claim(request_id, name, source.shape)
        return self._copy_into(claim, source.ctypes.data, source.nbytes, source, again)

    def _copy_into(self, claim: Claim, address: int, nbytes: int, keep, again: bool) -> Optional[Claim]:
        """Copies `nbytes` at `address` (memory `keep` owns) into the claim's slot, guarded: a fault (its file
        truncated under it) retires the segment and frees the slot; None then, or SegmentShrunkError unless `again`."""
        if not nbytes:
            return claim
        try:
            self.arena.copy_into(claim.slot, address, nbytes)
            return claim
        except SegmentShrunkError as e:
            with self._lock:
                self.arena.retire_under(claim.slot, str(e))
                claim.posted = True
                claim._array = None
                self._slot_done((claim.uuid_msb, claim.uuid_lsb))
            if again:
                return None
            raise

    def _peer(self, entity: str, current: bool = False) -> PeerMailbox:
        """The entity's mailbox, mapped once; probed at most once a second (or, with `current`, checked to be the
        file at its name now: an ACK must reach a restarted producer, never its predecessor's unlinked mailbox)."""
        peer = self.peers.get(entity)
        now = time.monotonic()
        if peer is not None and (now > peer.next_check or (current and not peer.is_current())):
            peer.next_check = now + _LIVENESS_INTERVAL_S
            if not peer.is_alive():
                self._settle_positions()  # what it handled before it went, while its file is still mapped
                del self.peers[entity]
                peer.close()
                peer = None
        if peer is None:
            peer = PeerMailbox(self.directory, self.ns, entity)
            self.peers[entity] = peer
        return peer

    def await_peer(self, entity: str, timeout: float) -> bool:
        """Waits until `entity` runs (its mailbox is live and ready) or the timeout; True if it does. Raises
        MailboxVersionError at once if it runs another format."""
        f.check_entity(entity)
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                self._check_open()
                try:
                    self._peer(entity)
                    return True
                except MailboxVersionError:
                    raise
                except PeerUnavailableError:
                    pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))

    # ---- outcomes ----

    def poll_outcomes(self) -> List[Outcome]:
        """Reads what waits and returns the outcomes not told to a listener (all of them without one). After
        close() it returns the CLOSED ones."""
        self._check_not_forked()
        self._pass(None, 0)
        self._tell()
        with self._lock:
            out, self.outcomes = self.outcomes, []
        return out

    def await_outcomes(self, count: int, timeout: float) -> List[Outcome]:
        """Waits until `count` outcomes were decided (returned here without a listener, told to it with one), or
        nothing is in flight, or the timeout; returns as soon as one of these holds."""
        self._check_not_forked()
        deadline = time.monotonic() + timeout
        out: List[Outcome] = []
        told = self._told
        while True:
            since, _ = self._pass(None, 0)
            self._tell()
            with self._lock:
                out += self.outcomes
                self.outcomes = []
                done = len(out) if self.listener is None else self._told - told
                idle = not self.in_flight and not self._to_tell
            left = deadline - time.monotonic()
            if done >= count or idle or left <= 0:
                return out
            self._sleep(since, left, False)

    def in_flight_count(self) -> int:
        return len(self.in_flight)

    def _queue_outcome(self, outcome: Outcome):
        if self.listener is None:
            self.outcomes.append(outcome)
        else:
            self._to_tell.append(outcome)
        self._decided += 1
        self._event()

    def _tell(self) -> int:
        """Tells the listener the outcomes decided, one at a time: the thread that finds none being told tells them
        all, so a listener never runs inside another. Returns how many this call told."""
        if not self._to_tell:
            return 0
        with self._lock:
            if self._telling:
                return 0
            self._telling = True
        told = 0
        first = None
        while True:
            with self._lock:
                if not self._to_tell or self.listener is None:
                    self._telling = False
                    break
                o = self._to_tell.popleft()
                listener = self.listener
            try:
                if o.failure is None:
                    listener.delivered(o.request_id, o.uuid_msb, o.uuid_lsb)
                else:
                    listener.failed(o.request_id, o.uuid_msb, o.uuid_lsb, o.failure, o.detail)
            except BaseException as e:  # the rest are still told; the first is raised after them
                first = first or e
            with self._lock:
                self._told += 1
                told += 1
                self._event()
        if first is not None:
            raise first
        return told

    def _share_done(self, key, consumer: str, failure: Optional[str], detail: Optional[str]) -> bool:
        """One consumer's share of a tensor in flight is done: ACKed (failure None), or it never will be. The last
        share decides the tensor: delivered when none failed, the first failure when none ACKed, else PARTIAL."""
        sent = self.in_flight.get(key)
        if sent is None or consumer not in sent.shares:
            return False
        del sent.shares[consumer]
        if failure is None:
            sent.acked += 1
        else:
            sent.failed.append((consumer, failure, detail))
        if sent.shares:
            return True
        if not sent.failed:
            return self._decide(key, None, None)
        details = "; ".join(d for _, _, d in sent.failed)
        if sent.acked == 0:
            return self._decide(key, sent.failed[0][1], details)
        return self._decide(key, PARTIAL, f"the other consumers of the fan-out ACKed it; {details}")

    def _decide(self, key, failure: Optional[str], detail: Optional[str]) -> bool:
        sent = self.in_flight.pop(key, None)
        if sent is None:
            return False
        self._slot_done(key)
        self._queue_outcome(Outcome(sent.request_id, key[0], key[1], failure, detail))
        return True

    def _slot_done(self, key):
        """The slot's tensor is decided (or its post failed): freed now, or when the last view of its claim goes."""
        state = self._claims.get(key)
        if state is None:
            return
        if state[1]:
            state[2] = "done"
        else:
            del self._claims[key]
            if self.arena is not None and not self.closed:
                self.arena.free(state[0], *key)

    def _check_liveness(self):
        """Each consumer incarnation with tensors, probed once a second: a dead one, or one whose entity now runs
        another incarnation, loses them (CONSUMER_DIED)."""
        now = time.monotonic()
        if now < self.next_liveness or not self.in_flight or self._no_liveness:
            return
        self.next_liveness = now + _LIVENESS_INTERVAL_S
        shares = {(c, i) for s in self.in_flight.values() for c, i in s.shares.items() if i is not None}
        dead = []
        for consumer, incarnation in shares:
            peer = self.peers.get(consumer)
            if peer is None or peer.incarnation != incarnation or not peer.is_alive():
                dead.append((consumer, incarnation))
        if not dead:
            return
        self._settle_positions()  # what a dead consumer's handled position passed before it went was delivered
        for consumer, incarnation in dead:
            for key, s in list(self.in_flight.items()):
                if s.shares.get(consumer) == incarnation:
                    self._share_done(key, consumer, CONSUMER_DIED, f"consumer {consumer} died before ACKing")
            self._positions.pop((consumer, incarnation), None)
            self._seen_handled.pop((consumer, incarnation), None)

    def _settle_positions(self):
        """A producer's rule of docs/format.md, section 12a (the lock held): loads each consumer's handled position
        (acquire), then its own ring's tail (acquire), reads its own ring up to that tail (the kept messages and
        refusals there win over the position), and only then tells DELIVERED each remembered POSITION post whose
        end position the handled position reached, that was neither refused nor kept. A read that stops short of
        the tail (a claim not yet published) decides nothing: the next call tries again."""
        if not self._positions:
            return
        handled = {}
        for consumer_key, remembered in self._positions.items():
            peer = self.peers.get(consumer_key[0])
            if peer is not None and peer.incarnation == consumer_key[1] and peer.fd >= 0:
                h = peer.handled()
                if remembered and h >= remembered[0][0]:
                    handled[consumer_key] = h
                else:
                    self._seen_handled[consumer_key] = h  # it reached none of them: nothing to decide
        if not handled:
            return
        tail = self.mailbox.tail()
        while self.mailbox.head() < tail:
            head = self.mailbox.head()
            self._drain()
            if self.mailbox.head() == head:
                return  # stopped short of the tail: next time
        for consumer_key, h in handled.items():
            self._seen_handled[consumer_key] = h
            remembered = self._positions.get(consumer_key)
            consumer, incarnation = consumer_key
            while remembered and remembered[0][0] <= h:
                end, key = remembered.popleft()
                sent = self.in_flight.get(key)
                if sent is not None and sent.position == end and not sent.kept \
                        and sent.shares.get(consumer) == incarnation:
                    self.stats["by_position"] += 1
                    self._share_done(key, consumer, None, None)
            if not remembered:
                self._positions.pop(consumer_key, None)
                self._seen_handled.pop(consumer_key, None)

    def _position_moved(self) -> bool:
        """Whether a consumer's handled position moved past a remembered POSITION post since it was last looked at
        (after arming the doorbell: a consumer that moves it later rings it)."""
        for consumer_key, remembered in self._positions.items():
            peer = self.peers.get(consumer_key[0])
            if remembered and peer is not None and peer.incarnation == consumer_key[1] and peer.fd >= 0:
                h = peer.handled()
                if h > self._seen_handled.get(consumer_key, 0) and h >= remembered[0][0]:
                    return True
        return False

    # ---- receiving ----

    def receive(self, handler: Callable[[Received], None], timeout: float = 0.0, limit: int = 64) -> int:
        """Hands up to `limit` tensors to `handler`, waiting up to `timeout` seconds; returns how many it handed.
        Returns as soon as it handed one or an outcome was decided (told to the listener on this call). Each tensor
        is ACKed (or, with the POSITION flag, told by the handled position) once the handler returned and no view of
        it is left (after `keep()`, once it is closed).

        A handler may raise: that tensor is done, the rest wait for the next call, and the error is raised here."""
        self._check_open()
        deadline = time.monotonic() + timeout
        decided = self._decided
        handed = 0
        while True:
            since, n = self._pass(handler, limit - handed)
            handed += n
            self._tell()
            left = deadline - time.monotonic()
            if handed >= 1 or self._decided != decided or left <= 0 or self.closed:
                return handed
            self._sleep(since, left, True)

    def wait(self, timeout: float) -> bool:
        """Waits until a tensor or an outcome waits to be taken (by receive, poll_outcomes or await_outcomes), or
        the timeout; True if one does. For an executor thread: see `wait_async`."""
        self._check_open()
        deadline = time.monotonic() + timeout
        while True:
            since, _ = self._pass(None, 0)
            with self._lock:
                if self.waiting or self.outcomes or self._to_tell or self.closed:
                    return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._sleep(since, left, True)

    async def wait_async(self, timeout: float) -> bool:
        """`wait` for asyncio: `while await ep.wait_async(1.0) or True: ep.receive(handle)` on the event loop, whose
        thread then runs the handlers and listeners; the wait itself runs in the loop's default executor."""
        return await asyncio.get_running_loop().run_in_executor(None, self.wait, timeout)

    def _pass(self, handler, limit: int) -> Tuple[int, int]:
        """One pass: reads the mailbox, hands up to `limit` waiting tensors to `handler` (outside the lock), sends
        the ACKs owed, probes liveness. Returns the event count at its end (for `_sleep`) and the tensors handed."""
        with self._lock:
            if self.closed or self._forked:
                return self._events, 0
            self._drain()
            self._settle_positions()
            batch = [self.waiting.popleft() for _ in range(min(limit, len(self.waiting)))] if handler else []
        handed = 0
        try:
            for i, (_, handing) in enumerate(batch):
                if self.closed or self._close_requested:
                    with self._lock:
                        self.waiting.extendleft(reversed(batch[i:]))  # close() refuses them
                    break
                try:
                    handed += self._hand(handing, handler)
                except BaseException:
                    with self._lock:
                        self.waiting.extendleft(reversed(batch[i + 1:]))
                    raise
        finally:
            with self._lock:
                if not self.closed and not self._forked:
                    self._housekeeping()
                since = self._events
            if self._close_requested and not getattr(self._local, "handing", 0):
                self.close()
        return since, handed

    def _drain(self):
        """Reads what waits in the mailbox (the lock held): descriptors wait for a handler, ACKs decide outcomes. Also
        called while a write waits for room in a peer's ring, so that two endpoints writing to each other never
        stall."""
        messages = self.mailbox.read_decoded(64)
        for mtype, decoded, end in messages:
            self._message(mtype, decoded, end)
        if messages:
            self._event()

    def _housekeeping(self):
        self._release_views()
        self._flush_acks()
        self._pass_position()
        self._check_liveness()
        self.files.sweep()
        self.stats["skipped_claims"] = self.mailbox.unblocks
        if self.arena is not None:
            self.stats["retired_segments"] = self.arena.retired
        if self._stats_file is not None:
            try:
                self._stats_file.publish(self.stats)
            except OSError:
                pass  # a full tmpfs or a planted name: the stats are for people, the tensors go on
        if self.sweep_interval_s > 0 and time.monotonic() > self.next_sweep:
            self.next_sweep = time.monotonic() + self.sweep_interval_s
            self.stats["swept_files"] += sweep(self.directory)

    def _event(self):
        self._events += 1
        if self._sleepers:
            self.mailbox.wake()

    def _sleep(self, since: int, timeout: float, for_tensors: bool):
        """Sleeps on the mailbox's doorbell until a sender rings it, another thread of this endpoint has news (an
        event after `since`), or the timeout; never longer than _MAX_SLEEP_S."""
        with self._lock:
            if (self._events != since or self._released or self.closed or self._forked
                    or (for_tensors and self.waiting)):
                return
            cap = 0.05 if (self.pending_acks or self.pending_refusals or self.pending_kept) else _MAX_SLEEP_S
            self._sleepers += 1
            ready = self.mailbox.arm() or self._position_moved()  # after the arm: a consumer's doorbell is seen
        try:
            if not ready:
                self.mailbox.sleep(min(timeout, cap))
        finally:
            with self._lock:
                self._sleepers -= 1

    def _message(self, mtype: int, decoded, end: int):
        """One message read (decoded by Mailbox.read_decoded): descriptors wait for a handler; ACKs, refusals and kept
        messages apply to the tensors in flight. A message whose framing failed is dropped whole and counted."""
        message = _Message(end)
        self._unpassed.append(message)  # passed once its records are handled (none: at once)
        if isinstance(decoded, f.DescriptorFormatError):
            self.stats["bad_descriptors"] += 1
            return
        sender, items = decoded
        if mtype == f.DESCRIPTORS:
            for d in items:
                if isinstance(d, f.DescriptorFormatError):
                    self.stats["bad_descriptors"] += 1
                    refusable = getattr(d, "refusable", None)
                    if refusable is not None and refusable[3] & f.FLAG_POSITION:
                        # refused before its handler: its producer is told before the position passes it (12a)
                        self._queue(self.pending_refusals, refusable[0], refusable[1:3], message)
                else:
                    message.records += 1
                    self.waiting.append((sender, _Handing(d, message)))
            return
        for msb, lsb in items:
            sent = self.in_flight.get((msb, lsb))
            if sent is None or sent.shares.get(sender) is None:  # not sent to it, or its share is gone already
                self.stats["unknown_acks"] += 1
                continue
            if mtype == f.KEPT:
                if sent.position is None:
                    self.stats["unknown_acks"] += 1  # only a POSITION post can be kept this way
                else:
                    sent.kept = True  # its ACK or refusal decides it; the position passing it does not
                    self.stats["kept"] += 1
                continue
            self.stats["acks"] += 1
            if mtype == f.ACKS:
                self._share_done((msb, lsb), sender, None, None)
            else:
                self._share_done((msb, lsb), sender, REFUSED, f"consumer {sender} refused it: it could not read it in"
                                                              f" its slot (the slot reused or its file truncated)")

    def _hand(self, handing: _Handing, handler) -> int:
        d = handing.d
        spill = d.placement == f.PLACEMENT_SPILL
        end = d.offset + d.nbytes if spill else f.stamp_at(d.offset, d.nbytes) + f.STAMP_BYTES
        with self._lock:
            if self.closed:
                handing.message.records -= 1
                return 0
            try:
                region = self.files.region(d.file_name, end)
                hold = region.hold()
                if not spill and not self._stamp_holds(hold, d):
                    self.stats["stale_reads"] += 1
                    self._refuse(handing)
                    return 0
                dtype = _NUMPY[f.DTYPES[d.dtype][0]]
                if d.nbytes:
                    array = lend(hold, region.address + d.offset, dtype, d.shape, False,
                                 lambda h: self._released.append((handing, h)))
                    on_let_go = None
                else:
                    array = np.empty(d.shape, dtype)  # zero bytes: nothing of the file (huge dims fail here)
                    array.flags.writeable = False
                    on_let_go = lambda: self._released.append((handing, None))  # noqa: E731
            except UntrustedFileError:
                self.stats["refused_files"] += 1
                self._refuse(handing)  # never touched; its producer frees it
                return 0
            except (OSError, ValueError, MemoryError):  # no such file, outside it (DescriptorFormatError), too big
                self.stats["bad_descriptors"] += 1
                self._refuse(handing)
                return 0
            self.stats["received"] += 1
        tensor = Received(self, d, array, on_let_go)
        del array, hold
        local = self._local
        local.handing = getattr(local, "handing", 0) + 1
        with self._lock:
            self._handlers_running += 1
        try:
            handler(tensor)
        finally:
            local.handing -= 1
            if not tensor._kept:
                tensor._let_go()
            with self._lock:
                self._handlers_running -= 1
                self._handlers_done.notify_all()
                self._handler_returned(handing)
        return 1

    def _refuse(self, handing: _Handing):
        """A record refused before its handler (a stamp, a check, a close): its refusal, which for a POSITION record
        is written before the handled position passes it (section 12a)."""
        d = handing.d
        message = handing.message if d.by_position else None
        self._queue(self.pending_refusals, d.producer, (d.uuid_msb, d.uuid_lsb), message)
        handing.message.records -= 1

    def _handler_returned(self, handing: _Handing):
        """A record's handler returned (the lock held): the record is handled. A POSITION record whose views all went
        owes nothing (its stamp checked again as they went: a refusal if it failed); one whose views outlive the
        handler owes a kept message before the position passes it, and its ACK or refusal when they go."""
        self._release_views()
        d = handing.d
        message = handing.message
        if d.by_position:
            if handing.state == "handing":
                handing.state = "kept"
                self._queue(self.pending_kept, d.producer, (d.uuid_msb, d.uuid_lsb), message)
            if message.producers is None:
                message.producers = set()
            message.producers.add(d.producer)
        message.records -= 1

    def _stamp_holds(self, mapping, d: f.Descriptor) -> bool:
        return self._no_stamp_check or stamp_holds(mapping, d.offset, d.nbytes, d.uuid_msb, d.uuid_lsb)

    def _after_let_go(self):
        """A view let go outside receive (a kept tensor closed): its ACK now rather than at the next call."""
        if not self._forked and not getattr(self._local, "handing", 0):
            with self._lock:
                if not self.closed:
                    self._release_views()
                    self._flush_acks()

    def _release_views(self):
        """Leases whose last view went: a received tensor is ACKed (its stamp checked again) or refused; a claim's
        slot is freed once its tensor is decided. A POSITION tensor whose views went before its handler returned
        is not ACKed: the handled position tells it (a failed stamp is refused before the position passes it)."""
        while self._released:
            what, hold = self._released.popleft()
            if isinstance(what, tuple):  # a claim's uuid
                state = self._claims.get(what)
                if state is not None:
                    state[1] = False
                    if state[2] != "posted":
                        self._slot_done(what)
                continue
            handing = what
            d = handing.d
            key = (d.uuid_msb, d.uuid_lsb)
            stale = d.placement == f.PLACEMENT_ARENA and hold is not None and not self._still_holds(hold, d)
            if stale:
                self.stats["stale_reads"] += 1
            if d.by_position and handing.state == "handing":  # let go within its handler
                handing.state = "released"
                if stale:
                    self._queue(self.pending_refusals, d.producer, key, handing.message)
            elif stale:
                self._queue(self.pending_refusals, d.producer, key)
            else:
                self._queue(self.pending_acks, d.producer, key)

    def _still_holds(self, hold, d: f.Descriptor) -> bool:
        try:
            self.files.region(d.file_name, f.stamp_at(d.offset, d.nbytes) + f.STAMP_BYTES)  # not truncated since
        except (OSError, ValueError):
            return False
        return self._stamp_holds(hold, d)

    @staticmethod
    def _queue(pending, producer, key, message: Optional[_Message] = None):
        """Owes `producer` a message about `key`; with `message`, the handled position waits for it to be written."""
        if message is not None:
            message.owed += 1
        pending.setdefault(producer, []).append((key, message))

    def _flush_acks(self, wait_s: float = 0.0):
        """Sends the kept messages, refusals and ACKs owed (in that order: a tensor's kept message comes before its
        ACK). A full ring keeps them for the next pass (a slow producer is not a dead one), and the handled position
        waits for those it owes; a producer that is gone takes its files with it."""
        for pending, mtype in ((self.pending_kept, f.KEPT), (self.pending_refusals, f.REFUSALS),
                               (self.pending_acks, f.ACKS)):
            for producer, items in list(pending.items()):
                try:
                    peer = self._peer(producer, current=True)
                    while items:
                        batch = items[:_ACKS_PER_MESSAGE]
                        body = f.encode_uuids([key for key, _ in batch])
                        if not peer.write(mtype, f.encode_message(self.entity, len(batch), body), wait_s,
                                          self._drain):
                            break
                        del items[:_ACKS_PER_MESSAGE]
                        _written(batch)
                        self.stats["kept_sent" if mtype == f.KEPT else "acks_sent"] += len(batch)
                    if not items:
                        del pending[producer]
                except PeerUnavailableError as e:
                    self.stats["unreachable_peers"] += 1
                    if self._producer_gone(producer, e):
                        _written(pending.pop(producer))  # nobody to tell: the position need not wait for them
                    # else: not proven dead (a mailbox not ready, a write cut short): owed still, as for a full ring

    def _producer_gone(self, producer: str, error: PeerUnavailableError) -> bool:
        """Whether the producer an owed message is for is proven gone: its mailbox name holds no file, or one whose
        lock nobody holds, or one of another format (another process took the name: its incarnation changed)."""
        if isinstance(error, MailboxVersionError):
            return True
        path = os.path.join(self.directory, f.mailbox_name(self.ns, producer))
        return not os.path.lexists(path) or owner_is_dead(path)

    def _pass_position(self):
        """Moves the handled position (section 12a) past the messages read whose records were all handled and whose
        owed messages were written, in ring order, never past one that is not; then rings the doorbell of each
        producer whose POSITION record it passed, once per pass."""
        unpassed = self._unpassed
        passable = self._passable
        while unpassed:
            message = unpassed[0]
            if message.records or message.owed:
                break
            unpassed.popleft()
            passable = message.end
            if message.producers:
                self._to_ring.update(message.producers)
        if passable != self._passable:
            self._passable = passable
            self.mailbox.store_handled(passable)
        if self._to_ring:
            to_ring, self._to_ring = self._to_ring, set()
            for producer in to_ring:
                try:
                    self._peer(producer, current=True).ring_doorbell()
                except PeerUnavailableError:
                    pass  # gone: nobody waits for it

    # ---- closing ----

    def _check_not_forked(self):
        if self._forked:
            raise RuntimeError(f"this endpoint belongs to the process that opened it (pid {self._pid}), not to a"
                               f" forked child: open an endpoint of the child's own: entity={self.entity}")

    def _check_open(self):
        self._check_not_forked()
        if self.closed:
            raise RuntimeError(f"endpoint is closed: entity={self.entity}")

    def close(self):
        """Reads the ACKs that wait, refuses the tensors not handed, sends the ACKs owed, tells every tensor still in
        flight CLOSED, and removes every file of its own. Called by a handler, it takes effect when the handler
        returned (its tensor is ACKed first). In a forked child it only lets go of the child's copies."""
        if self._forked:
            return
        if getattr(self._local, "handing", 0):
            self._close_requested = True
            return
        with self._lock:
            if self.closed:
                return
            # Handlers running on other threads (a SIGTERM, a supervisor closing): their tensors are handled, so
            # their ACKs go first; no more are handed over meanwhile. Bounded, as the JVM's close waits.
            self._close_requested = True
            deadline = time.monotonic() + _CLOSE_WAITS_FOR_HANDLERS_S
            while self._handlers_running and time.monotonic() < deadline:
                self._handlers_done.wait(deadline - time.monotonic())
            if self.closed:
                return
            atexit.unregister(self.close)
            try:
                self._drain()
                self._settle_positions()
                self._release_views()
                while self.waiting:
                    _, handing = self.waiting.popleft()
                    self._refuse(handing)
                self._flush_acks(1.0)
                self._pass_position()
            finally:
                self.closed = True
                for key in list(self.in_flight):
                    self._decide(key, CLOSED, "the endpoint closed first")
                for peer in self.peers.values():
                    peer.close()
                self.peers.clear()
                if self.arena is not None:
                    self.arena.close()
                self._claims.clear()
                self.files.close()
                if self._stats_file is not None:
                    self._stats_file.remove()
                self.mailbox.close()
                self._event()
        self._tell()

    def _after_fork_in_child(self):
        """The child of a fork: the locks and files are the parent's. Closing the child's copies of the descriptors
        (never unlocking them) lets the kernel see the parent die; nothing of the parent's is removed."""
        self._lock = threading.RLock()
        self._local = threading.local()
        self._forked = True
        atexit.unregister(self.close)
        self.mailbox.drop_after_fork()
        if self.arena is not None:
            self.arena.drop_after_fork()
        for peer in self.peers.values():
            peer.drop_after_fork()
        self.files.drop_after_fork()
        if self._stats_file is not None:
            self._stats_file.drop_after_fork()


def _after_fork():
    for endpoint in list(_ENDPOINTS):
        endpoint._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork)


def _as_torch(array: np.ndarray, code: int):
    import torch
    t = torch.from_numpy(array)
    name = f.DTYPES[code][0]
    if name == "BF16" or name.startswith("F8_"):
        wanted = getattr(torch, _TORCH_NAMES[name], None)
        if wanted is not None:
            t = t.view(wanted)  # the 8-bit floats stay their bits on a torch without them (1.13)
    return t


def _written(items):
    """Owed messages written (or that nobody can be told): the handled position no longer waits for them."""
    for _, message in items:
        if message is not None:
            message.owed -= 1


def _targets(to) -> List[str]:
    """The consumers of a post: one entity, or a fan-out's list or tuple of distinct ones."""
    if isinstance(to, str):
        return [f.check_entity(to)]
    if not isinstance(to, (list, tuple)):
        raise TypeError(f"to must be an entity or a list or tuple of entities: to={to!r}")
    if not to:
        raise ValueError("a fan-out needs at least one consumer: to=[]")
    for entity in to:
        if not isinstance(entity, str):
            raise TypeError(f"an entity is a str: {entity!r} in to={to!r}")
        f.check_entity(entity)
    if len(set(to)) != len(to):
        raise ValueError(f"a fan-out names each consumer once: to={list(to)!r}")
    return list(to)


def _seconds(env, name: str, default: str) -> float:
    raw = env.get(name, default)
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{name} must be a number of seconds >= 0 (0 turns it off): {name}={raw!r}")
    return value


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
