"""Files in the shared-memory directory (docs/format.md, sections 3, 6, 10, 11): owned files that are their own
liveness lock, mailboxes (ours to read, peers' to write), and peers' segments mapped read-only once each."""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
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


class UntrustedFileError(OSError):
    """A name this process opens holds something it must not read: not a regular file (a directory, a link, a
    FIFO), or a file of another user. Counted and refused; the endpoint serves on."""


class PeerUnavailableError(RuntimeError):
    """No live process runs as that entity, or its mailbox did not take the message in time."""

    def __init__(self, entity: str, detail: str):
        super().__init__(detail)
        self.entity = entity


class MailboxVersionError(PeerUnavailableError):
    """The entity's mailbox is of another format than this process speaks (docs/format.md, sections 6 and 14): a
    format 1 process (its file reads 0 at the version offset) beside a format 2 one. Nothing is written to it."""

    def __init__(self, entity: str, found: int, path: str):
        super().__init__(entity, f"mailbox of entity {entity} speaks format {found or 1} ({found} there), this process"
                                 f" speaks format {f.MAILBOX_VERSION}; run one format per deployment: path={path}")
        self.found = found
        self.expected = f.MAILBOX_VERSION


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


def open_checked(path: str, flags: int):
    """Opens a name another process made, as the JVM does: never blocking (a FIFO), never through a link, and only
    a regular file of this user. Returns (fd, fstat); FileNotFoundError when nothing is there."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as e:  # ELOOP (a link), EISDIR, ENXIO, EACCES...
        raise UntrustedFileError(e.errno, f"refused to open: {e.strerror}: path={path}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise UntrustedFileError(errno.EPERM, f"refused to open: not a regular file of uid {os.geteuid()}:"
                                                  f" path={path}, mode={oct(st.st_mode)}, uid={st.st_uid}")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def map_apart(fd: int, size: int, prot: int) -> mmap.mmap:
    """Maps the file through an open file of its own: Python's mmap keeps a dup of the descriptor it maps, which
    would share the locks of `fd` (flock and OFD locks belong to the open file) and keep them held in a forked child
    after this process died."""
    flags = os.O_RDWR if prot & mmap.PROT_WRITE else os.O_RDONLY
    apart = os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC)
    try:
        return mmap.mmap(apart, size, mmap.MAP_SHARED, prot)
    finally:
        os.close(apart)


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
        while True:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            if _same_file(self.path, os.fstat(self.fd)):
                break
            os.close(self.fd)  # a sweep took it for a dead owner's between the create and the lock: again
        try:
            if size > 0:
                os.posix_fallocate(self.fd, 0, size)  # a full tmpfs fails here, never as SIGBUS later
            self.map = map_apart(self.fd, size, mmap.PROT_READ | mmap.PROT_WRITE) if size else None
        except BaseException:
            os.close(self.fd)
            os.unlink(self.path)
            raise
        self.size = size
        self.address = address_of(self.map) if self.map is not None else 0
        self._hold = None
        self.linked = True

    def hold(self):
        """An export of the mapping: while an array lent from it lives, the mapping cannot be closed."""
        if self._hold is None:
            self._hold = np.frombuffer(self.map, np.uint8)
        return self._hold

    def drop_after_fork(self):
        """In a forked child: closes this copy of the descriptor without unlocking (the lock is the parent's)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def unlink(self):
        """Removes the name only (if it still names this file): nobody opens it again; the mapping and lock stay."""
        if self.linked:
            self.linked = False
            if self.fd >= 0 and _same_file(self.path, os.fstat(self.fd)):
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass

    def remove(self):
        """Unlinks the file, then lets go of its mapping and lock (a view still held keeps the mapping)."""
        if self.linked:
            self.linked = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._hold = None
        if self.map is not None:
            try:
                self.map.close()
            except BufferError:
                pass  # a numpy view of it lives: the mapping goes with the last one
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _same_file(path: str, st) -> bool:
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def owner_is_dead(path: str) -> bool:
    """Whether nobody holds the file's lock: its owner is dead (section 11). False when the file is gone or is
    not a file of this user."""
    try:
        fd, _ = open_checked(path, os.O_RDONLY)
    except (FileNotFoundError, UntrustedFileError):
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
        fd, st = open_checked(path, os.O_RDONLY)
    except (FileNotFoundError, UntrustedFileError):
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _same_file(path, st):
            return False
        os.unlink(path)
        return True
    finally:
        os.close(fd)


_SWEPT = re.compile(r"mstar_[0-9a-f]{16}_(arena|spill|mailbox|stats)_.+")


def sweep(directory: str) -> int:
    """Removes the files of dead owners (segments, spill files, mailboxes, stats files of this user, any
    namespace), as the JVM's sweep does (docs/operations.md); returns how many. Never a live owner's: each file is
    its owner's lock. The node budget file is the JVM's to remove (docs/format.md, section 13)."""
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        # A `.next` too (a stats snapshot its writer died before renaming): its owner locks it as it makes it.
        if _SWEPT.fullmatch(name) and remove_if_dead(os.path.join(directory, name)):
            removed += 1
    return removed


class Mailbox:
    """This entity's mailbox: created here, read by this process only (one thread at a time: the endpoint's lock)."""

    def __init__(self, directory: str, ns: str, entity: str):
        self.ns = ns
        name = f.mailbox_name(ns, entity)
        path = os.path.join(directory, name)
        deadline = time.monotonic() + 5
        while True:
            try:
                self.file = OwnedFile(directory, name, f.MAILBOX_FILE_BYTES)
                break
            except FileExistsError:
                if remove_if_dead(path):
                    continue  # a dead predecessor's
                if time.monotonic() > deadline:
                    raise EntityInUseError(f"another live process runs as entity={entity} in this deployment (it"
                                           f" holds the mailbox), or the name is taken by something else: path={path}"
                                           ) from None
                time.sleep(0.01)
        base = self.file.address
        self.ring = base
        self.sleeping = base + f.SLEEPING_OFFSET
        self.handled_at = base + f.HANDLED_OFFSET
        self.handled = 0  # the handled position stored last (section 12a); 0 in a new mailbox
        self.state = ffi.new("int64_t[4]")  # the reader's head, resync flag, records and bytes skipped
        self.state[0] = lib.mst_load_acquire64(base + f.RING_BYTES + f.HEAD_OFFSET)
        self.out = ffi.new("uint8_t[]", f.RING_BYTES + 8)
        self.count = ffi.new("int32_t *")
        self.counts = ffi.new("int32_t[3]")
        self._ns = ffi.new("char[]", ns.encode("ascii"))
        self.decoded = ffi.new("int64_t[]", _DECODED_RECORDS * _DECODED.size // 8)
        self.unblocks = 0
        self._stuck_since = None
        self._idle_check = time.monotonic()
        self.closed = False
        incarnation = secrets.randbits(63) | 1
        struct.pack_into("<I", self.file.map, f.VERSION_OFFSET, f.MAILBOX_VERSION)  # before the incarnation
        lib.mst_store_release64(base + f.INCARNATION_OFFSET, incarnation)  # last: the mailbox is ready
        self.incarnation = incarnation

    def read(self, limit: int = 64):
        """Up to `limit` messages waiting, as (type, body bytes, end position) triples (the end position: the head
        just past the message's record, what the handled position passes once it is handled); garbage is skipped by
        the native reader, and a record claimed and never published is skipped after a while (section 7)."""
        if self.closed:
            return []
        n = lib.mst_ring_read(self.ring, f.RING_BYTES, self.state, self.out, len(self.out), limit, self.count)
        if self.count[0] == 0:
            self._skip_a_stuck_claim()
            return []
        self._stuck_since = None
        messages = []
        p = 0
        buf = ffi.buffer(self.out, n)
        for _ in range(self.count[0]):
            mtype, length, end = _OUT_HEADER.unpack_from(buf, p)
            messages.append((mtype, bytes(buf[p + 16:p + 16 + length]), end))
            p += 16 + ((length + 7) & ~7)
        return messages

    def read_decoded(self, limit: int = 64):
        """As `read`, with the messages decoded: (type, (sender, items) or the DescriptorFormatError that refused the
        whole message, end position). The native core reads the ring and decodes the descriptors messages of the
        pass in one call (the checks of format.decode_descriptor, in its order); what it left undecoded (more records
        than it holds) and the other types are decoded here."""
        if self.closed:
            return []
        n = lib.mst_read_pass(self.ring, f.RING_BYTES, self.state, self.out, len(self.out), limit, self.counts,
                              self._ns, self.decoded, _DECODED_RECORDS)
        records, decoded, covered = self.counts[0], self.counts[1], self.counts[2]
        if records == 0:
            self._skip_a_stuck_claim()
            return []
        self._stuck_since = None
        buf = ffi.buffer(self.out, n)
        fields = ffi.buffer(self.decoded, decoded * _DECODED.size)
        messages = []
        p = k = 0
        for m in range(records):
            mtype, length, end = _OUT_HEADER.unpack_from(buf, p)
            body_at = p + 16
            p = body_at + ((length + 7) & ~7)
            if mtype != f.DESCRIPTORS or m >= covered:
                body = buf[body_at:body_at + length]
                try:
                    messages.append((mtype, f.decode_message(mtype, body, self.ns), end))
                except f.DescriptorFormatError as e:
                    messages.append((mtype, e, end))
                continue
            items = []
            framing = None
            at = body_at + 1 + buf[body_at:body_at + 1][0] + 2  # the first record: the message's framing was checked natively
            while k < decoded:
                v = _DECODED.unpack_from(fields, k * _DECODED.size)
                if v[12] != m:
                    break
                k += 1
                if v[13] == 0:
                    items.append(_descriptor(buf, v))
                elif v[13] == _FRAMING:
                    framing = _native_error(v[13])
                else:  # refused alone: whom to tell, from its raw bytes (section 12a)
                    length_at = struct.unpack_from("<I", buf, at + 8)[0]
                    items.append(f.refused_record(_native_error(v[13]), buf, at, length_at))
                if framing is None:
                    at += struct.unpack_from("<I", buf, at + 8)[0]
            if framing is not None:
                messages.append((mtype, framing, end))
            else:
                sender = buf[body_at + 1:body_at + 1 + buf[body_at:body_at + 1][0]].decode("ascii")
                messages.append((mtype, (sender, items), end))
        return messages

    def head(self) -> int:
        """The reader's head: the position just past what was read."""
        return int(self.state[0])

    def store_handled(self, position: int):
        """Publishes the handled position (release; section 12a): every record before it was handled, and every
        kept message or refusal those records owed was written before this store. Never moves back."""
        if position > self.handled and not self.closed:
            self.handled = position
            lib.mst_store_release64(self.handled_at, position)

    def tail(self) -> int:
        return lib.mst_load_acquire64(self.ring + f.RING_BYTES + f.TAIL_OFFSET)

    def _skip_a_stuck_claim(self):
        """As the JVM's reader (DeadWriters): a claim that held the ring UNBLOCK_AFTER_S while a registered writer is
        dead, or STUCK_CLAIM_S whatever the writers, is rewritten as padding (Agrona's unblock)."""
        head, tail = self.state[0], self.tail()
        now = time.monotonic()
        if tail <= head:
            self._stuck_since = None
            if now - self._idle_check > UNBLOCK_AFTER_S:  # writers that died idle held no claim: forget them
                self._idle_check = now
                dead = self._dead_writers()
                if self.tail() == tail:
                    for i in dead:
                        self.file.map[f.WRITERS_OFFSET + i] = 0
            return
        if self._stuck_since is None or self._stuck_since[0] != head:
            self._stuck_since = (head, now)
            return
        waited = now - self._stuck_since[1]
        if waited < UNBLOCK_AFTER_S:
            return
        dead = self._dead_writers()
        if (dead or waited >= STUCK_CLAIM_S) and self._unblock(head, tail):
            for i in dead:
                self.file.map[f.WRITERS_OFFSET + i] = 0
            self.unblocks += 1
            self._stuck_since = None

    def _dead_writers(self):
        """Registered writer slots whose writer died: the byte reads 1 and no other open file locks it."""
        slots = self.file.map[f.WRITERS_OFFSET:f.WRITERS_OFFSET + f.WRITER_SLOTS]
        return [i for i, b in enumerate(slots) if b and lib.mst_ofd_locked(self.file.fd, f.WRITERS_OFFSET + i, 1) == 0]

    def _unblock(self, head: int, tail: int) -> bool:
        mask = f.RING_BYTES - 1
        at = head & mask
        length = lib.mst_load_acquire32(self.ring + at)
        if length < 0:  # a header written, the message never published
            struct.pack_into("<i", self.file.map, at + 4, -1)
            lib.mst_store_release32(self.ring + at, -length)
            return True
        if length != 0:
            return False
        end = tail & mask if tail - head < f.RING_BYTES - at else f.RING_BYTES
        i = at + 8
        while i < end and lib.mst_load_acquire32(self.ring + i) == 0:
            i += 8
        if i == end and end != f.RING_BYTES:
            return False  # nothing written after the claim yet: the next record will show where it ends
        struct.pack_into("<i", self.file.map, at + 4, -1)  # the claim, up to the next header (or the end), as padding
        lib.mst_store_release32(self.ring + at, i - at)
        return True

    def skipped(self):
        return int(self.state[2]), int(self.state[3])

    def has_message(self) -> bool:
        if self.closed:
            return False
        head = self.state[0]
        return self.state[1] != 0 or lib.mst_load_acquire32(self.ring + (head & (f.RING_BYTES - 1))) > 0

    def arm(self) -> bool:
        """Before a sleep (Dekker's rule, section 10): raises the doorbell flag; True if a message waits after all."""
        lib.mst_exchange32(self.sleeping, 1)
        return self.has_message()

    def sleep(self, timeout_s: float):
        """Sleeps on the doorbell (armed first) until a sender or another thread rings, or the timeout passes."""
        lib.mst_futex_wait(self.sleeping, 1, max(1, int(timeout_s * 1e9)))

    def wake(self):
        """Rings this mailbox's own doorbell: wakes this process's threads sleeping on it."""
        if lib.mst_load_acquire32(self.sleeping) != 0 and lib.mst_exchange32(self.sleeping, 0) != 0:
            lib.mst_futex_wake(self.sleeping)

    def close(self):
        self.closed = True
        lib.mst_store_release32(self.sleeping, 0)
        lib.mst_futex_wake(self.sleeping)
        self.file.remove()

    def drop_after_fork(self):
        self.closed = True
        self.file.drop_after_fork()


UNBLOCK_AFTER_S = 1.0
STUCK_CLAIM_S = 3.0
_OUT_HEADER = struct.Struct("<iiq")  # what the native reader puts before each message: type, length, end position
# A record the native core decoded: msb, lsb, nbytes, offset, shape[8], message, error, then the offset and length
# of requestId, producer and fileName, then dtype, placement, rank, flags.
_DECODED = struct.Struct("<24q")
_DECODED_RECORDS = 1024  # records a pass decodes natively; the rest are decoded in Python
_FRAMING = -1
_FIELDS = {1: "magic", 2: "version", 3: "reserved", 4: "flags", 5: "length", 6: "dtype", 7: "placement", 8: "rank",
           9: "shape", 10: "nbytes", 11: "offset", 12: "requestId", 13: "producer", 14: "fileName"}


def _descriptor(buf, v) -> f.Descriptor:
    rank = v[22]
    return f.Descriptor(v[0], v[1], buf[v[14]:v[14] + v[15]].decode("utf-8"),
                        buf[v[16]:v[16] + v[17]].decode("ascii"), v[20], v[4:4 + rank], v[2], v[21],
                        buf[v[18]:v[18] + v[19]].decode("ascii"), v[3], v[23])


def _native_error(code: int) -> f.DescriptorFormatError:
    if code == _FRAMING:
        return f.DescriptorFormatError("message", "its framing failed (sender, count or record lengths): none of it"
                                                  " is believed")
    return f.DescriptorFormatError(_FIELDS.get(code, "unknown"), "refused by the native decoder")


def decode_natively(mtype: int, body: bytes, ns: str):
    """format.decode_message through the native core's decoder (the tests hold the two to each other): one message
    laid out as mst_ring_read leaves it, decoded by mst_decode_pass."""
    out = ffi.new("uint8_t[]", 16 + len(body) + 8)
    ffi.memmove(out, _OUT_HEADER.pack(mtype, len(body), 0) + body, 16 + len(body))
    decoded = ffi.new("int64_t[]", _DECODED_RECORDS * _DECODED.size // 8)
    covered = ffi.new("int32_t *")
    count = lib.mst_decode_pass(out, 16 + len(body), 1, ns.encode("ascii"), decoded, _DECODED_RECORDS, covered)
    if mtype != f.DESCRIPTORS or covered[0] != 1:
        return f.decode_message(mtype, body, ns)
    buf = ffi.buffer(out, 16 + len(body))
    values = [_DECODED.unpack_from(ffi.buffer(decoded, count * _DECODED.size), i * _DECODED.size)
              for i in range(count)]
    if values and values[0][13] == _FRAMING:
        raise _native_error(_FRAMING)
    return buf[17:17 + body[0]].decode("ascii"), [_descriptor(buf, v) if v[13] == 0 else _native_error(v[13])
                                                   for v in values]


_STARTING_S = 0.5  # how long a mailbox of ours not sized yet is looked at again before its entity is refused


class PeerMailbox:
    """Another entity's mailbox, mapped read-write to send to it; this process holds one writer slot in it."""

    def __init__(self, directory: str, ns: str, entity: str):
        self.entity = entity
        self.path = os.path.join(directory, f.mailbox_name(ns, entity))
        self.fd = -1
        starting_until = time.monotonic() + _STARTING_S
        while True:
            try:
                self.fd, st = open_checked(self.path, os.O_RDWR)
            except FileNotFoundError:
                raise PeerUnavailableError(entity, f"peer unavailable: entity {entity} has no mailbox"
                                                   f" ({self.path}): it does not run") from None
            except UntrustedFileError as e:
                raise PeerUnavailableError(entity, f"peer unavailable: the mailbox name of entity {entity} holds"
                                                   f" something else: {e}") from None
            if st.st_size >= f.MAILBOX_FILE_BYTES:
                break
            os.close(self.fd)  # a mailbox of ours not sized yet: its owner is making it, as the JVM looks again
            self.fd = -1
            if time.monotonic() > starting_until:
                raise PeerUnavailableError(entity, f"peer unavailable: entity {entity} is starting: its mailbox is"
                                                   f" not ready yet (wait with await_peer)")
            time.sleep(0.005)
        try:
            self.map = map_apart(self.fd, f.MAILBOX_FILE_BYTES, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self.base = address_of(self.map)
        self.inode = (st.st_dev, st.st_ino)
        self.slot = -1
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
        version = struct.unpack_from("<I", self.map, f.VERSION_OFFSET)[0]  # written before the incarnation
        if version != f.MAILBOX_VERSION:
            self.close()
            raise MailboxVersionError(entity, version, self.path)
        self.next_check = time.monotonic() + 1
        for i in range(f.WRITER_SLOTS):  # register: the first writer slot this open file can lock (section 6)
            if lib.mst_ofd_lock(self.fd, f.WRITERS_OFFSET + i, 1, F_WRLCK) == 1:
                self.slot = i
                self.map[f.WRITERS_OFFSET + i] = 1
                break
        self.message = ffi.new("uint8_t[]", f.RING_BYTES // 8)
        self._end = ffi.new("int64_t *")
        self.last_end = 0  # the end position of the record written last (section 7)

    def is_current(self) -> bool:
        """Whether the file at the mailbox's name is still the one mapped here (one stat)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        return (st.st_dev, st.st_ino) == self.inode

    def is_alive(self) -> bool:
        """Whether the owner that made this mailbox still holds it (its lock, and the same incarnation)."""
        if self.fd < 0 or owner_is_dead(self.path):
            return False
        return _same_file(self.path, os.fstat(self.fd))

    def handled(self) -> int:
        """The receiver's handled position (acquire; section 12a)."""
        return lib.mst_load_acquire64(self.base + f.HANDLED_OFFSET)

    def write(self, mtype: int, message: bytes, timeout_s: float = 30.0, while_full=None) -> bool:
        """Writes one message into the ring and rings the doorbell; False if the ring stayed full for `timeout_s`
        (a slow reader is not a dead one); on True, `last_end` is the record's end position in the ring. While it
        waits, it calls `while_full` (the caller drains its own mailbox: two endpoints writing to each other never
        stall) and raises PeerUnavailableError if the reader died."""
        if len(message) > f.RING_BYTES // 8:
            raise ValueError(f"a message is at most {f.RING_BYTES // 8} bytes: {len(message)}")
        ffi.memmove(self.message, message, len(message))
        deadline = None
        while True:
            written = lib.mst_ring_write(self.base, f.RING_BYTES, mtype, self.message, len(message), self._end)
            if written == 1:
                break
            if written < 0:
                raise ValueError("message too long for the ring")
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout_s
            if now >= deadline:
                return False
            if now > self.next_check:  # a full ring whose reader died never drains
                self.next_check = now + 1
                if not self.is_alive():
                    raise PeerUnavailableError(self.entity, f"peer unavailable: entity {self.entity} died")
            if while_full is not None:
                while_full()
            time.sleep(0.0001)
        self.last_end = self._end[0]
        self.ring_doorbell()
        return True

    def ring_doorbell(self):
        """Rings the receiver's doorbell (section 10): after a record, or after a handled position that passed a
        record of the receiver's (section 12a). The full fence orders the store before the look at the word."""
        if self.fd < 0:
            return
        lib.mst_full_fence()
        sleeping = self.base + f.SLEEPING_OFFSET
        if lib.mst_load_acquire32(sleeping) != 0 and lib.mst_exchange32(sleeping, 0) != 0:
            lib.mst_futex_wake(sleeping)

    def close(self):
        """Lets go of the writer slot, the mapping and the file; idempotent."""
        if self.fd < 0:
            return
        if self.slot >= 0:
            self.map[f.WRITERS_OFFSET + self.slot] = 0
            lib.mst_ofd_lock(self.fd, f.WRITERS_OFFSET + self.slot, 1, F_UNLCK)
            self.slot = -1
        try:
            self.map.close()
        except BufferError:
            pass
        os.close(self.fd)
        self.fd = -1

    def drop_after_fork(self):
        """In a forked child: closes this copy of the file (the writer slot's lock stays the parent's)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Mapped:
    __slots__ = ("fd", "map", "address", "length", "_hold")

    def __init__(self, fd, m, length):
        self.fd, self.map, self.length = fd, m, length
        self.address = address_of(m) if length else 0
        self._hold = None

    def hold(self):
        """An export of the mapping: while an array lent from it lives, the mapping cannot be closed."""
        if self._hold is None:
            self._hold = np.frombuffer(self.map, np.uint8) if self.map is not None else np.zeros(0, np.uint8)
        return self._hold


class PeerFiles:
    """Peers' segments and spill files, each mapped read-only once and kept while any view of it lives."""

    def __init__(self, directory: str):
        self.directory = directory
        self.maps = {}  # file name -> _Mapped
        self.next_sweep = time.monotonic() + 1

    def region(self, name: str, end: int) -> _Mapped:
        """The mapping of `name`, checked to hold `end` bytes before anything is touched (section 3). The size is
        read again (fstat) for every tensor: a file truncated under a mapping would fault (SIGBUS) on the read."""
        m = self.maps.get(name)
        if m is None:
            fd, st = open_checked(os.path.join(self.directory, name), os.O_RDONLY)
            try:
                size = st.st_size
                if end > size:
                    raise f.DescriptorFormatError("offset", f"the tensor lies outside its file: {name} has {size}"
                                                            f" bytes, the tensor and its stamp need {end}")
                m = _Mapped(fd, mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ) if size else None, size)
            except BaseException:
                os.close(fd)
                raise
            self.maps[name] = m
            return m
        size = min(os.fstat(m.fd).st_size, m.length)
        if end > size:
            raise f.DescriptorFormatError("offset", f"the tensor lies outside its file: {name} has {size} bytes,"
                                                    f" the tensor and its stamp need {end}")
        return m

    def sweep(self):
        """Lets go of the mappings whose file is gone and that no view holds."""
        now = time.monotonic()
        if now < self.next_sweep:
            return
        self.next_sweep = now + 1
        for name in list(self.maps):
            if not os.path.exists(os.path.join(self.directory, name)) and self._let_go(self.maps[name]):
                del self.maps[name]

    @staticmethod
    def _let_go(m: _Mapped) -> bool:
        m._hold = None
        if m.map is not None:
            try:
                m.map.close()
            except BufferError:
                return False  # a view lives: next time
        os.close(m.fd)
        return True

    def close(self):
        for m in self.maps.values():
            if not self._let_go(m):
                os.close(m.fd)  # the mapping stays with its views
        self.maps.clear()

    def drop_after_fork(self):
        for m in self.maps.values():
            os.close(m.fd)
        self.maps.clear()
