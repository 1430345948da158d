"""The Python side of the conformance worker protocol, the mirror of the JVM's
io.mstar.transport.conformance.ConformanceWorker: the same command lines, the same printed lines, so that the
conformance matrix runs every scenario with either language at either end.

    python -m mstar_transport.conformance produce ENDPOINT ENTITY TO[,TO2] COUNT SEED WINDOW [SIZE] [--threads N]
        [--stop-last] [--first-seq S] [--pace-ms P] [--wait S] [--first-to GHOST] [--pause-ms P] [--pause-at N]
        [--listener post|raise:N|close:N] [--close-then-poll] [--no-listener] [--fork child-exits|child-lives]
    python -m mstar_transport.conformance consume ENDPOINT ENTITY COUNT MODE [--idle S]
        [--fork child-exits|child-lives]

`produce` posts COUNT checked tensors (word k of tensor seq holds seq * 0x9E3779B97F4A7C15 + k mod 2**64; request id:
seq, or "stop" for the last one with --stop-last), SIZE bytes each or a seeded mix of 4 KiB, 64 KiB and 1 MiB,
keeping at most WINDOW untold; a window shut for --wait seconds (10) ends the posting (STALL); after the last post
it waits up to as long for every outcome, closes the endpoint (which tells what is still in flight) and prints
`RESULT posted= raised= delivered= failed= told= duplicates= unknown= settleMs= stalled= unknownAcks= afterClose=
pollErrors= failures={..}`. --pause-at N moves the --pause-ms pause before post N (printing PAUSED); --listener makes
the listener post the next tensor per outcome (a request loop), raise on every Nth or close the endpoint at the Nth;
--close-then-poll closes once posted, then polls and awaits outcomes; --no-listener opens with none and counts the
outcomes the polls return; --fork forks once READY, the child exiting at once or living 60 s (CHILD pid=).
`consume` receives up to COUNT tensors, checking every word, until one named "stop" or --idle seconds (15) without
one, in MODE plain, raise:N, keep, keep-raise:N, slow:MS, close-on-stop, stop-after:N or stale-view, and prints READY,
PROGRESS and `RESULT received= bad= duplicates= raised= errors= badInput= skipped= forged= staleViews= refusedViews=
ownViews= openAccessors=`; an endpoint that does not open prints OPEN-FAILED and exits 3. The JVM worker's javadoc
says what each mode and field means.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import numpy as np

from .endpoint import Endpoint, Listener
from .shm import EntityInUseError

GOLDEN = 0x9E3779B97F4A7C15
MASK = 2**64 - 1
GOLDEN_INVERSE = pow(GOLDEN, -1, 2**64)
PROGRESS_AT = 1000
OPEN_FAILED_EXIT = 3


def split_mix64(x: int) -> int:
    z = (x + GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def size_of(seed: int, seq: int) -> int:
    """A mix of 80% 4 KiB, 17% 64 KiB and 3% 1 MiB, a function of (seed, seq) alone, as the JVM side's."""
    pick = split_mix64((seed + seq) & MASK) % 100
    return 4096 if pick < 80 else 65536 if pick < 97 else 1 << 20


def words(seq: int, nbytes: int) -> np.ndarray:
    return np.arange(nbytes // 8, dtype=np.uint64) + np.uint64((seq * GOLDEN) & MASK)


def checked_seq(array) -> int:
    """The tensor's seq when every word holds it (from word 0, so "stop" needs no number), else -1."""
    if array is None or array.nbytes == 0 or array.nbytes % 8:
        return -1
    data = array.reshape(-1).view(np.uint64)
    base = int(data[0])
    if not np.array_equal(data, np.arange(data.size, dtype=np.uint64) + np.uint64(base)):
        return -1
    return (base * GOLDEN_INVERSE) & MASK


def counts(d) -> str:
    """{A=1, B=2}, sorted by name: the same text both languages print."""
    return "{" + ", ".join(f"{k}={d[k]}" for k in sorted(d)) + "}"


def _parse(argv):
    positional, options = [], {}
    i = 0
    while i < len(argv):
        if argv[i] in ("--stop-last", "--close-then-poll", "--no-listener"):
            options[argv[i][2:]] = "true"
        elif argv[i].startswith("--"):
            options[argv[i][2:]] = argv[i + 1]
            i += 1
        else:
            positional.append(argv[i])
        i += 1
    return positional, options


class Producer(Listener):
    """Posts checked tensors under a window; counts every outcome its listener is told."""

    def __init__(self, positional, options):
        self.to = positional[3].split(",")
        self.count = int(positional[4])
        self.seed = int(positional[5])
        self.window = int(positional[6])
        self.fixed_size = int(positional[7]) if len(positional) > 7 else 0
        self.threads = int(options.get("threads", 1))
        self.stop_last = "stop-last" in options
        self.first_seq = int(options.get("first-seq", 0))
        self.pace_s = int(options.get("pace-ms", 0)) / 1000
        self.wait_s = int(options.get("wait", 10))
        self.ghost = options.get("first-to")
        self.pause_s = int(options.get("pause-ms", 0)) / 1000
        self.pause_at = int(options.get("pause-at", 0))
        self.listener_mode, _, every = options.get("listener", "count").partition(":")
        self.listener_every = int(every) if every else 0
        self.close_then_poll = "close-then-poll" in options
        self.no_listener = "no-listener" in options
        self.fork = options.get("fork")
        self.ep = None
        self.closed_by_listener = False
        self.close_returned = False
        self.told_after_close = self.poll_errors = 0
        self.lock = threading.RLock()
        self.told_ids, self.raised_ids, self.attempted = {}, set(), set()
        self.failures, self.errors = {}, {}
        self.posted = self.raised = self.n_delivered = self.n_failed = 0
        self.told_total = self.duplicates = self.unknown = self.told_unique = 0
        self.last_progress = time.monotonic()
        self.all_told = 0.0
        self.stalled = False
        self.next_seq = 0

    def run(self, deployment: str, entity: str) -> int:
        unknown_acks, settle_ms = 0, -1
        ep = self.ep = Endpoint.open(deployment, entity, listener=None if self.no_listener else self)
        try:
            print("READY", flush=True)
            _fork(self.fork)
            if not self.pause_at:
                time.sleep(self.pause_s)
            if self.ghost is not None:
                self._post_one(ep, [self.ghost], "ghost", self.first_seq, 4096)
            posters = [threading.Thread(target=self._post_all, args=(ep,), name=f"poster-{t}")
                       for t in range(self.threads)]
            for poster in posters:
                poster.start()
            for poster in posters:
                poster.join()
            last_post = time.monotonic()
            with self.lock:
                self.last_progress = last_post
            # a request loop posts from its listener: wait until it posted all, then for their outcomes
            while (not self.close_then_poll and not self.closed_by_listener
                   and (self._untold() > 0 or self.listener_mode == "post" and self.next_seq < self.count)
                   and time.monotonic() - self.last_progress < self.wait_s):
                self._await(ep)
            if not self.closed_by_listener:
                unknown_acks = ep.stats.get("unknown_acks", 0)
            with self.lock:
                settle_ms = -1 if self._untold() > 0 else max(0, int((self.all_told - last_post) * 1000))
        finally:
            try:
                ep.close()  # tells what is still in flight
            except Exception as e:  # noqa: BLE001 - a listener's raise comes out here too: counted
                self._error(e)
            with self.lock:
                self.close_returned = True
        if self.close_then_poll:
            self._poll_after_close(ep)
        with self.lock:
            if self.errors:
                print(f"POST-ERRORS {counts(self.errors)}", flush=True)
            print(f"RESULT posted={self.posted} raised={self.raised} delivered={self.n_delivered} "
                  f"failed={self.n_failed} told={self.told_total} duplicates={self.duplicates} unknown={self.unknown} "
                  f"settleMs={settle_ms} "
                  f"stalled={str(self.stalled).lower()} unknownAcks={unknown_acks} afterClose={self.told_after_close} "
                  f"pollErrors={self.poll_errors} failures={counts(self.failures)}", flush=True)
            ok = self.told_total == self.posted and not self.duplicates and not self.unknown \
                and self.n_delivered == self.posted
            return 0 if ok else 1

    def _poll_after_close(self, ep):
        """After close: polls and awaits outcomes five times each; each may tell what close left, never raises."""
        for _ in range(5):
            try:
                self._count_returned(ep.poll_outcomes())
                self._count_returned(ep.await_outcomes(64, 0.05))
            except Exception as e:  # noqa: BLE001 - counted: the scenario asserts there are none
                with self.lock:
                    self.poll_errors += 1
                self._error(e)

    def _count_returned(self, outcomes):
        """Outcomes a poll returned (an endpoint with no listener), counted as a listener counts them."""
        for o in outcomes or ():
            self._told(o.request_id, o.failure)

    def _await(self, ep):
        """Reads the outcomes waiting (told to this listener); sleeps a moment when none came."""
        before = self.told_total
        try:
            self._count_returned(ep.poll_outcomes())
        except Exception as e:  # noqa: BLE001 - counted and printed: the scenario decides
            self._error(e)
        if self.told_total == before:
            time.sleep(0.0005)

    def _post_all(self, ep):
        while True:
            with self.lock:
                if self.stalled or self.closed_by_listener or self.next_seq >= self.count \
                        or self.listener_mode == "post" and self.next_seq >= self.window:
                    return  # a request loop's listener posts the rest
                seq = self.first_seq + self.next_seq
                self.next_seq += 1
            if self.pause_at and seq == self.first_seq + self.pause_at:
                print("PAUSED", flush=True)
                time.sleep(self.pause_s)
            if not self._await_window(ep):
                return
            name = "stop" if self.stop_last and seq == self.first_seq + self.count - 1 else str(seq)
            self._post_one(ep, self.to, name, seq, self.fixed_size or size_of(self.seed, seq))
            if self.pace_s:
                time.sleep(self.pace_s)

    def _await_window(self, ep) -> bool:
        while True:
            with self.lock:
                if self.stalled or self.closed_by_listener:
                    return False
                if self._untold() < self.window:
                    return True
                if time.monotonic() - self.last_progress > self.wait_s:
                    self.stalled = True
                    print(f"STALL posted={self.posted} told={self.told_total}", flush=True)
                    return False
            self._await(ep)

    def _post_one(self, ep, consumers, name: str, seq: int, nbytes: int):
        with self.lock:
            self.attempted.add(name)
        try:
            claim = ep.claim(name, "U8", (nbytes,))
            claim.array.view(np.uint64)[...] = words(seq, nbytes)
            ep.post(consumers[0] if len(consumers) == 1 else list(consumers), claim)
            with self.lock:
                self.posted += 1
        except Exception as e:  # noqa: BLE001 - a post that raises is counted, and must never be told
            with self.lock:
                self.raised += 1
                self.raised_ids.add(name)
            self._error(e)

    def _error(self, e: Exception):
        with self.lock:
            kind = type(e).__name__
            self.errors[kind] = self.errors.get(kind, 0) + 1
            if self.errors[kind] == 1:
                print(f"POST-ERROR {kind}: {e}", flush=True)

    def _untold(self) -> int:
        return len(self.attempted) - self.raised - self.told_unique

    def delivered(self, request_id, uuid_msb, uuid_lsb):
        self._listen(self._told(request_id, None))

    def failed(self, request_id, uuid_msb, uuid_lsb, failure, detail):
        self._listen(self._told(request_id, failure))

    def _listen(self, nth: int):
        """What the listener does besides counting, outside the lock: post the next tensor (a request loop), raise on
        every Nth outcome, or close the endpoint at the Nth."""
        if self.listener_mode == "post":
            with self.lock:
                if self.closed_by_listener or self.next_seq >= self.count:
                    return
                seq = self.first_seq + self.next_seq
                self.next_seq += 1
            self._post_one(self.ep, self.to, str(seq), seq, self.fixed_size or size_of(self.seed, seq))
        elif self.listener_mode == "raise":
            if nth % self.listener_every == 0:
                raise _ListenerRaised(f"conformance: the listener raises on outcome {nth}")
        elif self.listener_mode == "close":
            if nth == self.listener_every:
                self.closed_by_listener = True
                self.ep.close()
        elif self.listener_mode != "count":
            raise ValueError(f"listener: {self.listener_mode}")

    def _told(self, request_id: str, failure) -> int:
        """Counts one outcome; returns how many were told so far."""
        with self.lock:
            self.told_total += 1
            if self.close_returned:
                self.told_after_close += 1
            self.last_progress = time.monotonic()
            if failure is None:
                self.n_delivered += 1
            else:
                self.n_failed += 1
                self.failures[failure] = self.failures.get(failure, 0) + 1
            if request_id not in self.attempted or request_id in self.raised_ids:
                self.unknown += 1
            elif self.told_ids.get(request_id, 0):
                self.duplicates += 1
            else:
                self.told_ids[request_id] = 1
                self.told_unique += 1
                if self._untold() == 0:
                    self.all_told = time.monotonic()  # the last time every post so far was told
            return self.told_total


class _ListenerRaised(Exception):
    """What a raise:N listener raises: an application's bug in outcome handling."""


def _fork(how):
    """--fork: forks once; the child exits at once through the interpreter's exit (unwinding the endpoint's with
    block, atexit), or lives 60 s first; the parent goes on. None: no fork."""
    if how is None:
        return
    pid = os.fork()
    if pid:
        return
    print(f"CHILD pid={os.getpid()}", flush=True)
    if how == "child-lives":
        time.sleep(60)
    raise SystemExit(0)


class _Raised(Exception):
    """What a raise:N handler raises, as a failed check in a handler would."""


class Consumer:
    """Receives and checks tensors in one of the handler modes."""

    def __init__(self, positional, options):
        self.count = int(positional[3])
        mode = positional[4]
        self.mode, _, every = mode.partition(":")
        self.every = int(every) if every else 0
        self.idle_s = int(options.get("idle", 15))
        self.received = self.bad = self.duplicates = self.raised = self.errors = 0
        self.stop = False
        self.seen, self.error_types = set(), set()
        self.kept = None
        self.ep = None
        self.fork = options.get("fork")
        self.forged = self.stale_views = self.refused_views = self.own_views = self.open_accessors = 0
        self.handled, self.older = [], []  # stale-view: saved in this receive's handlers, and in the one before

    def run(self, deployment: str, entity: str) -> int:
        try:
            self.ep = Endpoint.open(deployment, entity)
        except Exception as e:  # noqa: BLE001 - the scenario asserts on the kind
            kind = "ENTITY_IN_USE" if isinstance(e, EntityInUseError) else "OTHER"
            print(f"OPEN-FAILED kind={kind} type={type(e).__name__} message={e}", flush=True)
            return OPEN_FAILED_EXIT
        try:
            print("READY", flush=True)
            _fork(self.fork)
            if self.mode == "stop-after":
                self._stop_after()
            else:
                self._loop()
            if self.kept is not None:
                self._release(self.kept)
                self.kept = None
        finally:
            self.ep.close()  # a second close (after close-on-stop) does nothing
        st = self.ep.stats
        print(f"RESULT received={self.received} bad={self.bad} duplicates={self.duplicates} raised={self.raised} "
              f"errors={self.errors} badInput={st.get('bad_descriptors', 0) + st.get('refused_files', 0)} "
              f"skipped={st.get('skipped_claims', 0)} forged={self.forged} staleViews={self.stale_views} "
              f"refusedViews={self.refused_views} ownViews={self.own_views} openAccessors={self.open_accessors}",
              flush=True)
        return 0 if not (self.bad or self.duplicates or self.errors) else 1

    def _loop(self):
        last = time.monotonic()
        while not self.stop and self.received < self.count and time.monotonic() - last < self.idle_s:
            before = self.received
            try:
                self.ep.receive(self._handle, timeout=0.2)
            except _Raised:
                pass  # the handler's own raise, counted there: receive again
            except Exception as e:  # noqa: BLE001 - counted and printed: the scenario decides
                self._error(e)
            if self.received > before:
                last = time.monotonic()
            if self.mode == "stale-view":
                self._check_saved()
        self._check_saved()
        self._check_saved()

    def _check_saved(self):
        """Reads what the handlers of the receive before the last one saved, long after they returned: the tensor's
        accessor must refuse, the saved view must refuse or still show its own tensor, never another's."""
        for tensor, view, seq in self.older:
            try:
                got = checked_seq(tensor.array)
                self.open_accessors += 1
                if got != seq:
                    self.stale_views += 1
            except Exception:  # noqa: BLE001 - refused: the promise
                pass
            try:
                if checked_seq(view) == seq:
                    self.own_views += 1
                else:
                    self.stale_views += 1
            except Exception:  # noqa: BLE001 - refused access
                self.refused_views += 1
        self.older, self.handled = self.handled, []

    def _stop_after(self):
        last = time.monotonic()
        while self.received < self.every and time.monotonic() - last < self.idle_s:
            before = self.received
            try:
                self.ep.receive(self._handle, timeout=0.001, limit=min(64, self.every - self.received))
            except Exception as e:  # noqa: BLE001
                self._error(e)
            if self.received > before:
                last = time.monotonic()
        print("PROGRESS", flush=True)
        time.sleep(120)  # alive and not reading, until signalled

    def _handle(self, tensor):
        name = tensor.request_id
        if name.startswith("forged"):
            self.forged += 1  # a forged descriptor handed over as a tensor
            return
        seq = checked_seq(tensor.array)
        if seq < 0 or name not in ("stop", "ghost", str(seq)):
            self.bad += 1
        if name in self.seen:
            self.duplicates += 1
        self.seen.add(name)
        self.received += 1
        if self.received == PROGRESS_AT:
            print("PROGRESS", flush=True)
        if name == "stop":
            self.stop = True
        if self.mode == "plain":
            pass
        elif self.mode == "raise":
            self._raise_every()
        elif self.mode == "keep":
            self._keep(tensor)
        elif self.mode == "keep-raise":
            self._keep(tensor)
            self._raise_every()
        elif self.mode == "slow":
            time.sleep(self.every / 1000)
        elif self.mode == "stop-after":
            pass  # stops reading in _stop_after
        elif self.mode == "stale-view":
            self.handled.append((tensor, tensor.array, seq))
        elif self.mode == "close-on-stop":
            if self.stop:
                self.ep.close()
        else:
            raise ValueError(f"mode: {self.mode}")

    def _raise_every(self):
        if self.received % self.every == 0:
            self.raised += 1
            raise _Raised(f"conformance: the handler raises on tensor {self.received}")

    def _keep(self, tensor):
        previous = self.kept
        self.kept = tensor.keep()
        if previous is not None:
            self._release(previous)

    def _release(self, tensor):
        """Checks a kept tensor's bytes once more (its slot must still be its own), then lets it go."""
        name = tensor.request_id
        seq = checked_seq(tensor.array)
        if seq < 0 or name not in ("stop", str(seq)):
            self.bad += 1
        tensor.close()

    def _error(self, e: Exception):
        self.errors += 1
        if type(e).__name__ not in self.error_types:
            self.error_types.add(type(e).__name__)
            print(f"RECEIVE-ERROR {type(e).__name__}: {e}", flush=True)


def _exit_when_parent_dies():
    """As the JVM's ParentWatch: standard input is a pipe from the test, closed by the kernel when the test dies;
    then SIGTERM ourselves, which the endpoint turns into a clean close."""
    def watch():
        try:
            while os.read(0, 4096):  # the raw descriptor: a buffered stdin's lock would block the exit
                pass
        except OSError:
            pass
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv) -> int:
    positional, options = _parse(argv)
    if len(positional) < 5 or positional[0] not in ("produce", "consume"):
        print(__doc__, file=sys.stderr)
        return 2
    _exit_when_parent_dies()
    if positional[0] == "produce":
        return Producer(positional, options).run(positional[1], positional[2])
    return Consumer(positional, options).run(positional[1], positional[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
