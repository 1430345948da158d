"""A Python producer's arena: its own segments cut into 256-byte-aligned slots, each stamped with its tensor's uuid
(docs/format.md, section 4), and a file per tensor when the segments are full (section 5)."""
from __future__ import annotations

import bisect
import secrets
import struct
import uuid as uuidlib

from . import format as f
from ._native import lib
from .shm import OwnedFile


class Slot:
    """Where one tensor lies: a segment's slot, or a spill file of its own."""
    __slots__ = ("file", "index", "offset", "nbytes", "size", "spill")

    def __init__(self, file: OwnedFile, index: int, offset: int, nbytes: int, size: int, spill: bool):
        self.file, self.index, self.offset, self.nbytes, self.size, self.spill = file, index, offset, nbytes, size, spill

    @property
    def address(self) -> int:
        return self.file.address + self.offset


class Segment:
    """One segment file and its free blocks (offset -> size, first fit, merged on free)."""

    def __init__(self, file: OwnedFile, index: int):
        self.file = file
        self.index = index
        self.starts = [0]
        self.sizes = {0: file.size}

    def take(self, size: int):
        for k, start in enumerate(self.starts):
            block = self.sizes[start]
            if block >= size:
                del self.sizes[start]
                del self.starts[k]
                if block > size:
                    self.sizes[start + size] = block - size
                    bisect.insort(self.starts, start + size)
                return start
        return -1

    def give_back(self, start: int, size: int):
        k = bisect.bisect_left(self.starts, start)
        if k < len(self.starts) and self.starts[k] == start + size:  # merge with the next free block
            size += self.sizes.pop(self.starts.pop(k))
        if k > 0 and self.starts[k - 1] + self.sizes[self.starts[k - 1]] == start:  # and the previous
            self.sizes[self.starts[k - 1]] += size
            return
        self.starts.insert(k, start)
        self.sizes[start] = size


class Arena:
    """Slots for this process's tensors; MSTAR_SHM_ARENA_* knobs as the JVM side reads them."""

    def __init__(self, directory: str, ns: str, entity: str, env):
        self.directory = directory
        self.ns = ns
        self.entity = entity
        self.nonce = secrets.token_hex(4)
        self.segment_bytes = int(env.get("MSTAR_SHM_ARENA_SEGMENT_MB", "256")) << 20
        self.max_segments = int(env.get("MSTAR_SHM_ARENA_MAX_SEGMENTS", "32"))
        self.full_timeout_s = float(env.get("MSTAR_SHM_ARENA_FULL_TIMEOUT_S", "30"))
        self.spill_on = env.get("MSTAR_SHM_ARENA_SPILL", "1").lower() in ("1", "true")
        self.segments = []
        self.spills = {}

    def take(self, nbytes: int, msb: int, lsb: int):
        """A stamped slot in a segment (growing one if the cap allows), or None when the arena is full."""
        size = (f.slot_bytes(nbytes) + f.SLOT_ALIGNMENT - 1) & ~(f.SLOT_ALIGNMENT - 1)
        slot = self._take(size, nbytes)
        if slot is not None:
            lib.mst_store_release64(slot.address + f.stamp_at(0, nbytes), msb)
            lib.mst_store_release64(slot.address + f.stamp_at(0, nbytes) + 8, lsb)
        return slot

    def spill(self, nbytes: int, msb: int, lsb: int) -> Slot:
        """A file of its own for a tensor the full arena could not take in time (section 5)."""
        if not self.spill_on:
            raise MemoryError(f"the arena is full ({len(self.segments)} segments of {self.segment_bytes >> 20} MiB)"
                              f" for {self.full_timeout_s} s and spilling is off (MSTAR_SHM_ARENA_SPILL=0)")
        uuid = uuidlib.UUID(int=(msb & (2**64 - 1)) << 64 | (lsb & (2**64 - 1)))
        file = OwnedFile(self.directory, f.spill_name(self.ns, self.entity, self.nonce, uuid), nbytes)
        slot = Slot(file, -1, 0, nbytes, nbytes, True)
        self.spills[(msb, lsb)] = slot
        return slot

    def _take(self, size: int, nbytes: int):
        for segment in self.segments:
            start = segment.take(size)
            if start >= 0:
                return Slot(segment.file, segment.index, start, nbytes, size, False)
        if len(self.segments) < self.max_segments:
            file = OwnedFile(self.directory, f.segment_name(self.ns, self.entity, self.nonce, len(self.segments)),
                             max(self.segment_bytes, size))
            segment = Segment(file, len(self.segments))
            self.segments.append(segment)
            start = segment.take(size)
            return Slot(file, segment.index, start, nbytes, size, False)
        return None

    def free(self, slot: Slot, msb: int, lsb: int):
        """Clears the stamp (then a fence: the next owner's bytes come after it) and frees the slot."""
        if slot.spill:
            self.spills.pop((msb, lsb), None)
            slot.file.remove()
            return
        at = slot.address + f.stamp_at(0, slot.nbytes)
        lib.mst_store_release64(at, 0)
        lib.mst_store_release64(at + 8, 0)
        lib.mst_full_fence()
        self.segments[slot.index].give_back(slot.offset, slot.size)

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
