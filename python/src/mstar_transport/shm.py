"""Files in the shared-memory directory (docs/format.md, sections 3, 6, 10, 11): owned files that are their own
liveness lock, mailboxes (ours to read, peers' to write), and peers' segments mapped read-only once each."""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import secrets
import stat
import struct
import time

import numpy as np

from . import format as f
from ._native import ffi, lib

F_WRLCK = 1
F_UNLCK = 2


class EntityInUseError(RuntimeError):
    """Another live process runs as this entity in this deployment (it holds the mailbox)."""


class PeerUnavailableError(RuntimeError):
    """No live process runs as that entity, or its mailbox did not take the message in time."""

    def __init__(self, entity: str, detail: str):
        super().__init__(detail)
        self.entity = entity


def shm_dir(env) -> str:
    """MSTAR_SHM_DIR, or the user's private /dev/shm/mstar-<uid> (mode 0700), made if missing."""
    configured = env.get("MSTAR_SHM_DIR")
    if configured:
        return configured
    path = f"/dev/shm/mstar-{os.geteuid()}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private directory of this user: set MSTAR_SHM_DIR")
    return path


def address_of(mapping) -> int:
    """The address of a mapping (the numpy view that tells it is let go at once, so close() stays possible)."""
    view = np.frombuffer(mapping, dtype=np.uint8, count=1)
    try:
        return view.ctypes.data
    finally:
        del view


class OwnedFile:
    """A file this process created (O_EXCL, 0600), locked LOCK_EX for its life, committed, mapped read-write."""

    def __init__(self, directory: str, name: str, size: int):
        self.path = os.path.join(directory, name)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            if size > 0:
                os.posix_fallocate(self.fd, 0, size)  # a full tmpfs fails here, never as SIGBUS later
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) if size else None
        except BaseException:
            os.close(self.fd)
            os.unlink(self.path)
            raise
        self.size = size
        self.address = address_of(self.map) if self.map is not None else 0

    def remove(self):
        """Unlinks the file, then lets go of its mapping and lock (a view still held keeps the mapping)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:
                pass  # a numpy view of it lives: the mapping goes with the last one
        os.close(self.fd)


def owner_is_dead(path: str) -> bool:
    """Whether nobody holds the file's lock: its owner is dead (section 11). False when the file is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def remove_if_dead(path: str) -> bool:
    """Removes a file of this user whose owner is dead, if the name still points at the inode probed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            now = os.lstat(path)
        except FileNotFoundError:
            return False
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False
        os.unlink(path)
        return True
    finally:
        os.close(fd)


class Mailbox:
    """This entity's mailbox: created here, read by this process only (one thread at a time)."""

    def __init__(self, directory: str, ns: str, entity: str):
        name = f.mailbox_name(ns, entity)
        deadline = time.monotonic() + 5
        while True:
            try:
                self.file = OwnedFile(directory, name, f.MAILBOX_FILE_BYTES)
                break
            except FileExistsError:
                if remove_if_dead(os.path.join(directory, name)):
                    continue  # a dead predecessor's
                if time.monotonic() > deadline:
                    raise EntityInUseError(f"another live process runs as entity={entity} in this deployment (it"
                                           f" holds the mailbox): path={os.path.join(directory, name)}") from None
                time.sleep(0.01)
        base = self.file.address
        self.ring = base
        self.sleeping = base + f.SLEEPING_OFFSET
        self.state = ffi.new("int64_t[4]")  # the reader's head, resync flag, records and bytes skipped
        self.state[0] = lib.mst_load_acquire64(base + f.RING_BYTES + f.HEAD_OFFSET)
        self.out = ffi.new("uint8_t[]", f.RING_BYTES + 8)
        self.count = ffi.new("int32_t *")
        incarnation = secrets.randbits(63) | 1
        lib.mst_store_release64(base + f.INCARNATION_OFFSET, incarnation)  # last: the mailbox is ready
        self.incarnation = incarnation

    def read(self, limit: int = 64):
        """Up to `limit` messages waiting, as (type, body bytes) pairs; garbage is skipped by the native reader."""
        n = lib.mst_ring_read(self.ring, f.RING_BYTES, self.state, self.out, len(self.out), limit, self.count)
        messages = []
        p = 0
        buf = ffi.buffer(self.out, n)
        for _ in range(self.count[0]):
            mtype, length = struct.unpack_from("<ii", buf, p)
            messages.append((mtype, bytes(buf[p + 8:p + 8 + length])))
            p += 8 + ((length + 7) & ~7)
        return messages

    def skipped(self):
        return int(self.state[2]), int(self.state[3])

    def has_message(self) -> bool:
        head = self.state[0]
        return self.state[1] != 0 or lib.mst_load_acquire32(self.ring + (head & (f.RING_BYTES - 1))) > 0

    def sleep(self, timeout_s: float):
        """Sleeps on the doorbell until a sender rings or the timeout passes (Dekker's rule, section 10)."""
        lib.mst_exchange32(self.sleeping, 1)
        if not self.has_message():
            lib.mst_futex_wait(self.sleeping, 1, max(1, int(timeout_s * 1e9)))

    def close(self):
        lib.mst_store_release32(self.sleeping, 0)
        lib.mst_futex_wake(self.sleeping)
        self.file.remove()


class PeerMailbox:
    """Another entity's mailbox, mapped read-write to send to it; this process holds one writer slot in it."""

    def __init__(self, directory: str, ns: str, entity: str):
        self.entity = entity
        self.path = os.path.join(directory, f.mailbox_name(ns, entity))
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            raise PeerUnavailableError(entity, f"peer unavailable: entity {entity} has no mailbox"
                                               f" ({self.path}): it does not run") from None
        try:
            size = os.fstat(self.fd).st_size
            if size < f.MAILBOX_FILE_BYTES:
                raise PeerUnavailableError(entity, f"the mailbox of entity {entity} is {size} bytes, not a mailbox")
            self.map = mmap.mmap(self.fd, f.MAILBOX_FILE_BYTES, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.base = address_of(self.map)
        if owner_is_dead(self.path):
            self.close()
            raise PeerUnavailableError(entity, f"peer unavailable: entity {entity} does not run (its mailbox"
                                               f" {self.path} is a dead process's)")
        deadline = time.monotonic() + 5
        while lib.mst_load_acquire64(self.base + f.INCARNATION_OFFSET) == 0:  # still starting
            if time.monotonic() > deadline:
                self.close()
                raise PeerUnavailableError(entity, f"the mailbox of entity {entity} never became ready")
            time.sleep(0.001)
        self.incarnation = lib.mst_load_acquire64(self.base + f.INCARNATION_OFFSET)
        self.slot = -1
        self.next_check = time.monotonic() + 1
        for i in range(f.WRITER_SLOTS):  # register: the first writer slot this open file can lock (section 6)
            if lib.mst_ofd_lock(self.fd, f.WRITERS_OFFSET + i, 1, F_WRLCK) == 1:
                self.slot = i
                self.map[f.WRITERS_OFFSET + i] = 1
                break
        self.message = ffi.new("uint8_t[]", f.RING_BYTES // 8)

    def is_alive(self) -> bool:
        """Whether the owner that made this mailbox still holds it (its lock, and the same incarnation)."""
        if owner_is_dead(self.path):
            return False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)

    def write(self, mtype: int, message: bytes, timeout_s: float = 30.0):
        """Writes one message into the ring and rings the doorbell; waits while the ring is full."""
        if len(message) > f.RING_BYTES // 8:
            raise ValueError(f"a message is at most {f.RING_BYTES // 8} bytes: {len(message)}")
        ffi.memmove(self.message, message, len(message))
        deadline = None
        while True:
            written = lib.mst_ring_write(self.base, f.RING_BYTES, mtype, self.message, len(message))
            if written == 1:
                break
            if written < 0:
                raise ValueError("message too long for the ring")
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout_s
            elif now > deadline:
                raise PeerUnavailableError(self.entity, f"the mailbox of entity {self.entity} stayed full for"
                                                        f" {timeout_s} s")
            if now > self.next_check:  # a full ring whose reader died never drains
                self.next_check = now + 1
                if not self.is_alive():
                    raise PeerUnavailableError(self.entity, f"peer unavailable: entity {self.entity} died")
            time.sleep(0.0001)
        lib.mst_full_fence()
        sleeping = self.base + f.SLEEPING_OFFSET
        if lib.mst_load_acquire32(sleeping) != 0 and lib.mst_exchange32(sleeping, 0) != 0:
            lib.mst_futex_wake(sleeping)

    def close(self):
        """Lets go of the writer slot, the mapping and the file; idempotent."""
        if self.fd < 0:
            return
        if getattr(self, "slot", -1) >= 0:
            self.map[f.WRITERS_OFFSET + self.slot] = 0
            lib.mst_ofd_lock(self.fd, f.WRITERS_OFFSET + self.slot, 1, F_UNLCK)
            self.slot = -1
        try:
            self.map.close()
        except BufferError:
            pass
        os.close(self.fd)
        self.fd = -1


class PeerFiles:
    """Peers' segments and spill files, each mapped read-only once and kept while any view of it lives."""

    def __init__(self, directory: str):
        self.directory = directory
        self.maps = {}  # file name -> mmap (None for an empty file)
        self.next_sweep = time.monotonic() + 1

    def mapping(self, name: str, end: int):
        """The mapping of `name`, checked to hold `end` bytes before anything is touched (section 3)."""
        m = self.maps.get(name)
        if m is None:
            fd = os.open(os.path.join(self.directory, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                size = os.fstat(fd).st_size
                if end > size:
                    raise f.DescriptorFormatError("offset", f"the tensor lies outside its file: {name} has {size}"
                                                            f" bytes, the tensor and its stamp need {end}")
                m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) if size else b""
            finally:
                os.close(fd)
            self.maps[name] = m
        elif end > len(m):
            raise f.DescriptorFormatError("offset", f"the tensor lies outside its file: {name} has {len(m)} bytes,"
                                                    f" the tensor and its stamp need {end}")
        return m

    def sweep(self):
        """Lets go of the mappings whose file is gone and that no view holds."""
        now = time.monotonic()
        if now < self.next_sweep:
            return
        self.next_sweep = now + 1
        for name in list(self.maps):
            if not os.path.exists(os.path.join(self.directory, name)):
                m = self.maps[name]
                try:
                    if isinstance(m, mmap.mmap):
                        m.close()
                    del self.maps[name]
                except BufferError:
                    pass  # a view lives: next time

    def close(self):
        for m in self.maps.values():
            if isinstance(m, mmap.mmap):
                try:
                    m.close()
                except BufferError:
                    pass
        self.maps.clear()
