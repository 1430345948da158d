"""A Python producer's arena: its own segments cut into 256-byte-aligned slots, each stamped with its tensor's uuid
(docs/format.md, section 4), and a file per tensor when the segments are full (section 5)."""
from __future__ import annotations

import bisect
import errno
import logging
import os
import secrets
import struct
import uuid as uuidlib

from . import format as f
from ._native import ffi, lib
from .shm import OwnedFile

_LOG = logging.getLogger("mstar_transport")
if lib.mst_guard_install() != 0:  # SIGBUS in a guarded write becomes SegmentShrunkError
    raise OSError(ffi.errno, "could not install the SIGBUS handler of the guarded writes")


class SegmentShrunkError(OSError):
    """A file of this process's arena was truncated under its mapping (another process of this user truncated it: a
    bug or malice): a write of the library's into it faulted, or would have. Its segment is retired."""


class Slot:
    """Where one tensor lies: a segment's slot, or a spill file of its own (segment None)."""
    __slots__ = ("file", "segment", "offset", "nbytes", "size", "spill")

    def __init__(self, file: OwnedFile, segment, offset: int, nbytes: int, size: int, spill: bool):
        self.file, self.segment, self.offset, self.nbytes, self.size, self.spill = (file, segment, offset, nbytes,
                                                                                      size, spill)

    @property
    def address(self) -> int:
        return self.file.address + self.offset

    @property
    def index(self) -> int:
        return -1 if self.segment is None else self.segment.index


class Segment:
    """One segment file and its free blocks (offset -> size, first fit, merged on free). A retired segment (its file
    was shrunk under us) hands out no slot, and goes when its last live slot is freed."""

    def __init__(self, file: OwnedFile, index: int, dedicated: bool = False):
        self.file = file
        self.index = index
        self.starts = [0]
        self.sizes = {0: file.size}
        self.live = 0
        self.retired = False
        self.dedicated = dedicated  # made for one tensor larger than a segment: only such tensors take from it

    def holds(self, end: int) -> bool:
        """Whether the file still reaches `end` (one fstat): a truncated file would fault (SIGBUS) past its end."""
        return self.file.fd >= 0 and os.fstat(self.file.fd).st_size >= end

    def take(self, size: int):
        for k, start in enumerate(self.starts):
            block = self.sizes[start]
            if block >= size:
                del self.sizes[start]
                del self.starts[k]
                if block > size:
                    self.sizes[start + size] = block - size
                    bisect.insort(self.starts, start + size)
                self.live += 1
                return start
        return -1

    def give_back(self, start: int, size: int):
        self.live -= 1
        if self.retired:
            return  # its free blocks are never handed out again
        k = bisect.bisect_left(self.starts, start)
        if k < len(self.starts) and self.starts[k] == start + size:  # merge with the next free block
            size += self.sizes.pop(self.starts.pop(k))
        if k > 0 and self.starts[k - 1] + self.sizes[self.starts[k - 1]] == start:  # and the previous
            self.sizes[self.starts[k - 1]] += size
            return
        self.starts.insert(k, start)
        self.sizes[start] = size


class Arena:
    """Slots for this process's tensors; MSTAR_SHM_ARENA_* knobs as the JVM side reads them.

    A segment shrunk under us (another process of this user truncated its file) is found before a slot of it is
    handed out, stamped, described or freed (one fstat), or when a guarded write into it faults: it is retired (no
    new slots, its name unlinked so that no consumer maps it again, removed once its last slot is freed) and the
    arena goes on in a fresh segment, as the JVM's SegmentedArena.retireShrunk does. Its tensors in flight are
    refused by their readers or delivered if they were read in time: each is told once."""

    def __init__(self, directory: str, ns: str, entity: str, env):
        self.directory = directory
        self.ns = ns
        self.entity = entity
        self.nonce = secrets.token_hex(4)
        self.segment_bytes = int(env.get("MSTAR_SHM_ARENA_SEGMENT_MB", "256")) << 20
        self.max_segments = int(env.get("MSTAR_SHM_ARENA_MAX_SEGMENTS", "32"))
        self.full_timeout_s = float(env.get("MSTAR_SHM_ARENA_FULL_TIMEOUT_S", "30"))
        self.spill_on = env.get("MSTAR_SHM_ARENA_SPILL", "1").lower() in ("1", "true")
        # Live and retired ones, until removed: their bytes, dedicated ones' included, count against one ceiling,
        # MAX_SEGMENTS x SEGMENT_MB, as the JVM's (the figure operators size the directory from).
        self.segments = []
        self.ceiling_bytes = self.max_segments * self.segment_bytes
        self.next_index = 0  # a name is never reused: a consumer may still map a retired segment's
        self.retired = 0
        self.spills = {}
        self._fault = ffi.new("uintptr_t *")  # for the stamps, written with the endpoint's lock held

    def take(self, nbytes: int, msb: int, lsb: int):
        """A stamped slot in a segment (growing one if the cap allows), or None when the arena is full. A segment
        found shrunk is retired on the way, and the slot taken from another."""
        size = (f.slot_bytes(nbytes) + f.SLOT_ALIGNMENT - 1) & ~(f.SLOT_ALIGNMENT - 1)
        while True:
            slot = self._take(size, nbytes)
            if slot is None:
                return None
            if self.holds(slot) and self._stamp(slot, msb, lsb):
                return slot
            self.free(slot, msb, lsb)  # retired: only counted out

    def holds(self, slot: Slot) -> bool:
        """Whether the slot's segment still reaches past the slot (one fstat); a shrunk one is retired here. A spill
        file is the reader's to check."""
        segment = slot.segment
        if segment is None:
            return True
        if segment.retired:
            return False
        if segment.holds(slot.offset + slot.size):
            return True
        self.retire(segment, f"the file is {os.fstat(segment.file.fd).st_size} bytes, the slot at {slot.offset}"
                             f" needs {slot.offset + slot.size}")
        return False

    def copy_into(self, slot: Slot, source: int, nbytes: int):
        """Copies `nbytes` from address `source` into the slot, without the endpoint's lock (the slot is the
        caller's alone); a truncation under it raises SegmentShrunkError, never SIGBUS: the caller then retires the
        segment (`retire_under`) with the lock held."""
        fault = ffi.new("uintptr_t *")
        if nbytes and lib.mst_guarded_copy(slot.address, source, nbytes, fault) != 0:
            raise SegmentShrunkError(errno.EFAULT, self._fault_detail(slot, "copying a tensor into its slot",
                                                                      int(fault[0])))

    def retire_under(self, slot: Slot, why: str):
        """Retires the segment of a slot whose write faulted (a spill file has none)."""
        if slot.segment is not None:
            self.retire(slot.segment, why)

    def _stamp(self, slot: Slot, msb: int, lsb: int) -> bool:
        at = slot.address + f.stamp_at(0, slot.nbytes)
        if lib.mst_guarded_stamp(at, msb, lsb, self._fault) == 0:
            return True
        self.retire_under(slot, self._fault_detail(slot, "writing a slot's stamp", int(self._fault[0])))
        return False

    @staticmethod
    def _fault_detail(slot: Slot, what: str, address: int) -> str:
        return (f"{what} faulted (SIGBUS) at offset {address - slot.file.address}: the file was truncated under its"
                f" mapping (a process of this user truncated it): file={os.path.basename(slot.file.path)}")

    def retire(self, segment: Segment, why: str):
        """No more slots from `segment`; its name goes now (no consumer maps it again), its file when it is empty."""
        if segment.retired:
            return
        segment.retired = True
        segment.starts, segment.sizes = [], {}
        self.retired += 1
        _LOG.warning("an arena segment was shrunk under its producer (another process of this user truncated it):"
                     " it is retired, and the arena goes on in another: segment=%s, %s",
                     os.path.basename(segment.file.path), why)
        segment.file.unlink()
        if segment.live == 0:
            self._remove(segment)

    def _remove(self, segment: Segment):
        segment.file.remove()
        if segment in self.segments:
            self.segments.remove(segment)

    def spill(self, nbytes: int, msb: int, lsb: int) -> Slot:
        """A file of its own for a tensor the full arena could not take in time (section 5)."""
        if not self.spill_on:
            raise MemoryError(f"the arena is full ({len(self.segments)} segments of {self.segment_bytes >> 20} MiB)"
                              f" for {self.full_timeout_s} s and spilling is off (MSTAR_SHM_ARENA_SPILL=0)")
        uuid = uuidlib.UUID(int=(msb & (2**64 - 1)) << 64 | (lsb & (2**64 - 1)))
        file = OwnedFile(self.directory, f.spill_name(self.ns, self.entity, self.nonce, uuid), nbytes)
        slot = Slot(file, None, 0, nbytes, nbytes, True)
        self.spills[(msb, lsb)] = slot
        return slot

    def _take(self, size: int, nbytes: int):
        large = size > self.segment_bytes
        # A large tensor takes the smallest idle dedicated segment that holds it; others, first fit in the rest.
        candidates = sorted((s for s in self.segments if s.dedicated and s.live == 0 and not s.retired),
                            key=lambda s: s.file.size) if large else \
            [s for s in self.segments if not s.dedicated and not s.retired]
        for segment in candidates:
            start = segment.take(size)
            if start >= 0:
                return Slot(segment.file, segment, start, nbytes, size, False)
        grown = size if large else self.segment_bytes
        while sum(s.file.size for s in self.segments) + grown > self.ceiling_bytes:
            idle = next((s for s in self.segments if s.dedicated and s.live == 0 and not s.retired), None)
            if idle is None:
                return None  # full: the caller waits for frees, then spills
            self._remove(idle)  # an idle dedicated segment gives its bytes back to the ceiling
        file = OwnedFile(self.directory, f.segment_name(self.ns, self.entity, self.nonce, self.next_index), grown)
        segment = Segment(file, self.next_index, dedicated=large)
        self.next_index += 1
        self.segments.append(segment)
        start = segment.take(size)
        return Slot(file, segment, start, nbytes, size, False)

    def free(self, slot: Slot, msb: int, lsb: int):
        """Clears the stamp (then a fence: the next owner's bytes come after it) and frees the slot. A slot of a
        shrunk segment is only counted out: its segment goes with its last slot."""
        if slot.spill:
            self.spills.pop((msb, lsb), None)
            slot.file.remove()
            return
        segment = slot.segment
        if self.holds(slot):
            self._stamp(slot, 0, 0)  # a fault retires the segment
        segment.give_back(slot.offset, slot.size)
        if segment.retired and segment.live == 0:
            self._remove(segment)

    def close(self):
        """Unlinks spill files, then segments."""
        for slot in list(self.spills.values()):
            slot.file.remove()
        self.spills.clear()
        for segment in self.segments:
            segment.file.remove()
        self.segments.clear()

    def drop_after_fork(self):
        for slot in self.spills.values():
            slot.file.drop_after_fork()
        for segment in self.segments:
            segment.file.drop_after_fork()


def stamp_holds(mapping, offset: int, nbytes: int, msb: int, lsb: int) -> bool:
    """Whether the slot still belongs to the tensor (the acquire fence keeps the reads of its bytes before)."""
    at = f.stamp_at(offset, nbytes)
    if at < 0 or at + f.STAMP_BYTES > len(mapping):
        return False
    lib.mst_acquire_fence()
    return struct.unpack_from("<qq", mapping, at) == (msb, lsb)
