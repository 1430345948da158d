"""The shared-memory format of docs/format.md: names, the descriptor record and the mailbox messages.

Pure Python and numpy-free, so the codecs can be tested byte for byte against the specification's golden blocks.
Every decoder believes nothing: it checks each field before it uses it and raises DescriptorFormatError naming
the first bad one.
"""
from __future__ import annotations

import hashlib
import re
import struct
import uuid as uuidlib
from dataclasses import dataclass
from typing import List, Sequence, Tuple

DESCRIPTOR_MAGIC = 0x4454534D  # "MSTD" read little-endian
DESCRIPTOR_VERSION = 2
MAILBOX_VERSION = 2  # the u32 at VERSION_OFFSET of a mailbox whose receiver speaks this format (a format 1 file: 0)
MAX_RANK = 8
MAX_REQUEST_ID_BYTES = 256
MAX_ENTITY_BYTES = 64
MAX_FILE_NAME_BYTES = 255
SHAPE_OFFSET = 48
MAX_RECORD_BYTES = SHAPE_OFFSET + 8 * MAX_RANK + 3 * (2 + 256)

# Message types: the ring record's type.
DESCRIPTORS = 1
ACKS = 2
REFUSALS = 3
KEPT = 4  # laid out as ACKs: POSITION tensors handled but kept past the handler; an ACK or refusal follows later

# The descriptor record's flags (byte 15).
FLAG_POSITION = 1  # the producer learns that the tensor was handled from the consumer's handled position (12a)
KNOWN_FLAGS = FLAG_POSITION

# The mailbox file (section 6).
RING_BYTES = 1 << 20
RING_TRAILER_BYTES = 768
TAIL_OFFSET = 128
HEAD_CACHE_OFFSET = 256
HEAD_OFFSET = 384
CORRELATION_OFFSET = 512  # the trailer's correlation line holds the receiver's handled position
HANDLED_OFFSET = RING_BYTES + CORRELATION_OFFSET
INCARNATION_OFFSET = RING_BYTES + RING_TRAILER_BYTES
SLEEPING_OFFSET = INCARNATION_OFFSET + 8
VERSION_OFFSET = SLEEPING_OFFSET + 4
WRITERS_OFFSET = INCARNATION_OFFSET + 64
WRITER_SLOTS = 1024
MAILBOX_FILE_BYTES = WRITERS_OFFSET + WRITER_SLOTS

STAMP_BYTES = 16
SLOT_ALIGNMENT = 256

PLACEMENT_ARENA = 1
PLACEMENT_SPILL = 2

# code: (name, item bytes)
DTYPES = {
    1: ("F32", 4), 2: ("F16", 2), 3: ("BF16", 2), 4: ("F64", 8), 5: ("I8", 1), 6: ("U8", 1), 7: ("I16", 2),
    8: ("I32", 4), 9: ("I64", 8), 10: ("BOOL", 1), 11: ("F8_E4M3FN", 1), 12: ("F8_E5M2", 1),
    13: ("F8_E4M3FNUZ", 1), 14: ("F8_E5M2FNUZ", 1),
}
DTYPE_CODES = {name: code for code, (name, _) in DTYPES.items()}

_ENTITY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ENTITY_CHARS = r"[A-Za-z0-9_.-]{1,64}"
_SEGMENT = re.compile(r"mstar_([0-9a-f]{16})_arena_(" + _ENTITY_CHARS + r")_([0-9a-f]{8})_([0-9]{1,10})")
_SPILL = re.compile(r"mstar_([0-9a-f]{16})_spill_(" + _ENTITY_CHARS + r")_([0-9a-f]{8})_([0-9a-f]{32})")

# magic, version, 0, length, dtype, placement, rank, flags, msb, lsb, nbytes, offset
_HEADER = struct.Struct("<IHHIBBBBqqqq")


class DescriptorFormatError(ValueError):
    """A record or message that does not follow docs/format.md; `field` names the first bad field."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"bad descriptor field {field}: {problem}")
        self.field = field


def namespace(endpoint: str, token: str | None = None) -> str:
    """The deployment's namespace: 16 hex digits of SHA-1 of token + NUL + "ipc://" + path (section 2)."""
    path = endpoint[len("ipc://"):] if endpoint.startswith("ipc://") else endpoint
    if not path:
        raise ValueError(f"endpoint must name the deployment: endpoint={endpoint!r}")
    material = ("" if not token else token + "\0") + "ipc://" + path
    return hashlib.sha1(material.encode("utf-8")).hexdigest()[:16]


def is_entity(name: str) -> bool:
    return name not in (".", "..") and _ENTITY.fullmatch(name) is not None


def check_entity(name: str) -> str:
    if not isinstance(name, str) or not is_entity(name):
        raise ValueError("entity must be 1 to 64 letters, digits, '_', '-' or '.', and not '.' or '..' (it becomes"
                         f" part of file names): entity={name!r}")
    return name


def mailbox_name(ns: str, entity: str) -> str:
    return f"mstar_{ns}_mailbox_{check_entity(entity)}"


def segment_name(ns: str, entity: str, nonce: str, index: int) -> str:
    return f"mstar_{ns}_arena_{check_entity(entity)}_{nonce}_{index}"


def spill_name(ns: str, entity: str, nonce: str, uuid: uuidlib.UUID) -> str:
    return f"mstar_{ns}_spill_{check_entity(entity)}_{nonce}_{uuid.hex}"


def stats_name(ns: str, entity: str, nonce: str) -> str:
    return f"mstar_{ns}_stats_{check_entity(entity)}_{nonce}"


def budget_name(ns: str) -> str:
    return f"mstar_{ns}_budget_node"


def is_ours(ns: str, name: str, spill: bool) -> bool:
    """Whether `name` is a segment (or spill file) name of namespace `ns`."""
    m = (_SPILL if spill else _SEGMENT).fullmatch(name)
    return m is not None and m.group(1) == ns and is_entity(m.group(2))


def stamp_at(offset: int, nbytes: int) -> int:
    """Where the stamp of a tensor of `nbytes` at `offset` lies (section 4)."""
    return offset + ((nbytes + 7) & ~7)


def slot_bytes(nbytes: int) -> int:
    return stamp_at(0, nbytes) + STAMP_BYTES


def _i64(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def _u64(i: int) -> int:
    return i & ((1 << 64) - 1)


@dataclass(frozen=True)
class Descriptor:
    """One tensor's descriptor (section 9). uuid_msb and uuid_lsb are signed 64-bit, as the JVM holds them; flags holds
    FLAG_POSITION when the producer learns of its handling from the consumer's handled position (section 12a)."""
    uuid_msb: int
    uuid_lsb: int
    request_id: str
    producer: str
    dtype: int
    shape: Tuple[int, ...]
    nbytes: int
    placement: int
    file_name: str
    offset: int
    flags: int = 0

    @property
    def by_position(self) -> bool:
        return bool(self.flags & FLAG_POSITION)

    @property
    def uuid(self) -> uuidlib.UUID:
        return uuidlib.UUID(int=_u64(self.uuid_msb) << 64 | _u64(self.uuid_lsb))


def encode_descriptor(d: Descriptor) -> bytes:
    rid = d.request_id.encode("utf-8")
    producer = d.producer.encode("ascii")
    file_name = d.file_name.encode("ascii")
    if len(d.shape) > MAX_RANK or len(rid) > MAX_REQUEST_ID_BYTES or len(producer) > MAX_ENTITY_BYTES \
            or len(file_name) > MAX_FILE_NAME_BYTES or d.flags & ~KNOWN_FLAGS:
        raise ValueError(f"descriptor cannot be encoded: rank {len(d.shape)}, request id {len(rid)} bytes,"
                         f" flags 0x{d.flags:x}")
    length = SHAPE_OFFSET + 8 * len(d.shape) + 6 + len(rid) + len(producer) + len(file_name)
    out = bytearray(_HEADER.pack(DESCRIPTOR_MAGIC, DESCRIPTOR_VERSION, 0, length, d.dtype, d.placement,
                                 len(d.shape), d.flags, d.uuid_msb, d.uuid_lsb, d.nbytes, d.offset))
    out += struct.pack(f"<{len(d.shape)}q", *d.shape)
    for s in (rid, producer, file_name):
        out += struct.pack("<H", len(s)) + s
    return bytes(out)


def record_length(buf, at: int, available: int) -> int:
    """The length a record at `at` declares, checked against what is available and the format's limits."""
    if available < SHAPE_OFFSET:
        raise DescriptorFormatError("length", f"truncated: {available} bytes, header needs {SHAPE_OFFSET}")
    length = struct.unpack_from("<I", buf, at + 8)[0]
    if length < SHAPE_OFFSET + 6 or length > MAX_RECORD_BYTES or length > available:
        raise DescriptorFormatError("length", f"declared {length} bytes, available {available}")
    return length


def decode_descriptor(buf, at: int, length: int, ns: str) -> Descriptor:
    """Decodes and validates one record of `length` bytes at `at`, in the order section 9 gives."""
    if length < SHAPE_OFFSET or at < 0 or at + length > len(buf):
        raise DescriptorFormatError("length", f"truncated: {length} bytes, header needs {SHAPE_OFFSET}")
    (magic, version, reserved, declared, dtype, placement, rank, flags, msb, lsb, nbytes,
     offset) = _HEADER.unpack_from(buf, at)
    if magic != DESCRIPTOR_MAGIC:
        raise DescriptorFormatError("magic", f"found 0x{magic:x}, expected 0x{DESCRIPTOR_MAGIC:x}")
    if version != DESCRIPTOR_VERSION:
        raise DescriptorFormatError("version", f"found {version}, this reader understands {DESCRIPTOR_VERSION}")
    if reserved != 0:
        raise DescriptorFormatError("reserved", "reserved bytes must be zero")
    if flags & ~KNOWN_FLAGS:
        raise DescriptorFormatError("flags", f"unknown flag bits 0x{flags & ~KNOWN_FLAGS:02x} set (known:"
                                             f" 0x{KNOWN_FLAGS:02x})")
    if declared != length:
        raise DescriptorFormatError("length", f"declared {declared} bytes, record has {length}")
    if dtype not in DTYPES:
        raise DescriptorFormatError("dtype", f"unknown code {dtype}")
    if placement not in (PLACEMENT_ARENA, PLACEMENT_SPILL):
        raise DescriptorFormatError("placement", f"unknown code {placement}")
    if rank > MAX_RANK:
        raise DescriptorFormatError("rank", f"found {rank}, accepted 0..{MAX_RANK}")
    p = SHAPE_OFFSET + 8 * rank
    if p + 6 > length:
        raise DescriptorFormatError("shape", f"truncated: rank {rank} needs {p + 6} bytes")
    shape = struct.unpack_from(f"<{rank}q", buf, at + SHAPE_OFFSET)
    elements = 1
    for i, dim in enumerate(shape):
        if dim < 0:
            raise DescriptorFormatError("shape", f"dimension {i} is negative: {dim}")
        elements *= dim
        if elements >= 1 << 63:
            raise DescriptorFormatError("shape", "element count overflows")
    expected = elements * DTYPES[dtype][1]
    if expected >= 1 << 63 or nbytes != expected:
        raise DescriptorFormatError("nbytes", f"found {nbytes}, shape x item size is {expected}")
    if offset < 0 or offset > (1 << 63) - 1 - nbytes:
        raise DescriptorFormatError("offset", f"found {offset} (negative or overflowing with nbytes)")
    if placement == PLACEMENT_SPILL and offset != 0:
        raise DescriptorFormatError("offset", f"spill files start at 0, found {offset}")
    strings = []
    for field, limit in (("requestId", MAX_REQUEST_ID_BYTES), ("producer", MAX_ENTITY_BYTES),
                         ("fileName", MAX_FILE_NAME_BYTES)):
        if p + 2 > length:
            raise DescriptorFormatError(field, "truncated")
        n = struct.unpack_from("<H", buf, at + p)[0]
        p += 2
        if n > limit or p + n > length:
            raise DescriptorFormatError(field, f"length {n} exceeds the record or the limit {limit}")
        raw = bytes(buf[at + p:at + p + n])
        try:
            strings.append(raw.decode("utf-8" if field == "requestId" else "ascii"))
        except UnicodeDecodeError:
            raise DescriptorFormatError(field, "not " + ("UTF-8" if field == "requestId" else "ASCII")) from None
        p += n
    if p != length:
        raise DescriptorFormatError("length", f"record has {length - p} trailing bytes")
    request_id, producer, file_name = strings
    if not is_entity(producer):
        raise DescriptorFormatError("producer", f"not an entity name: {producer!r}")
    if not is_ours(ns, file_name, placement == PLACEMENT_SPILL):
        kind = "spill file" if placement == PLACEMENT_SPILL else "segment"
        raise DescriptorFormatError("fileName", f"not a {kind} of namespace {ns}: {file_name!r}")
    return Descriptor(msb, lsb, request_id, producer, dtype, tuple(shape), nbytes, placement, file_name, offset, flags)


def refused_record(error: DescriptorFormatError, buf, at: int, length: int) -> DescriptorFormatError:
    """Marks a record refused by the checks with whom a refusal could go to (section 12a): `error.refusable` is
    (producer, msb, lsb, flags) read from the raw bytes when the record, framed by its own length, has the magic and
    the uuid (48 bytes), and its producer field reads as an entity name; else None (nobody to tell)."""
    error.refusable = None
    try:
        if length < SHAPE_OFFSET or at < 0 or at + length > len(buf) \
                or struct.unpack_from("<I", buf, at)[0] != DESCRIPTOR_MAGIC:
            return error
        rank, flags = struct.unpack_from("<BB", buf, at + 14)
        msb, lsb = struct.unpack_from("<qq", buf, at + 16)
        p = SHAPE_OFFSET + 8 * rank
        if rank > MAX_RANK or p + 2 > length:
            return error
        p += 2 + struct.unpack_from("<H", buf, at + p)[0]  # the request id
        if p + 2 > length:
            return error
        n = struct.unpack_from("<H", buf, at + p)[0]
        if n > MAX_ENTITY_BYTES or p + 2 + n > length:
            return error
        producer = bytes(buf[at + p + 2:at + p + 2 + n]).decode("ascii")
    except (UnicodeDecodeError, struct.error, IndexError):
        return error
    if is_entity(producer):
        error.refusable = (producer, msb, lsb, flags)
    return error


def encode_message(sender: str, count: int, items: bytes) -> bytes:
    """A message (section 8): sender, count, then the items as given."""
    name = check_entity(sender).encode("ascii")
    if not 0 <= count <= 0xFFFF:
        raise ValueError(f"a message holds at most 65535 items: {count}")
    return bytes([len(name)]) + name + struct.pack("<H", count) + items


def encode_uuids(uuids: Sequence[Tuple[int, int]]) -> bytes:
    """ACK, refusal or kept items: (msb, lsb) pairs, signed 64-bit each."""
    return b"".join(struct.pack("<qq", msb, lsb) for msb, lsb in uuids)


def decode_message(mtype: int, body, ns: str):
    """
    (sender, items): for type 1 one Descriptor per record, or the DescriptorFormatError that refused it (a bad
    record is refused alone, its neighbours stand); for types 2, 3 and 4 (msb, lsb) pairs. The framing of the whole
    message is checked first: a message whose framing fails raises, and none of it is believed.
    """
    length = len(body)
    if length < 1:
        raise DescriptorFormatError("sender", "empty message")
    n = body[0]
    if n == 0 or n > MAX_ENTITY_BYTES or length < 1 + n + 2:
        raise DescriptorFormatError("sender", f"bad sender name length {n}")
    try:
        sender = bytes(body[1:1 + n]).decode("ascii")
    except UnicodeDecodeError:
        raise DescriptorFormatError("sender", "not an entity name") from None
    if not is_entity(sender):
        raise DescriptorFormatError("sender", "not an entity name")
    count = struct.unpack_from("<H", body, 1 + n)[0]
    p = 1 + n + 2
    if mtype in (ACKS, REFUSALS, KEPT):
        if length - p != 16 * count:
            raise DescriptorFormatError("acks", f"{count} uuids need {16 * count} bytes, found {length - p}")
        return sender, [struct.unpack_from("<qq", body, p + 16 * k) for k in range(count)]
    if mtype != DESCRIPTORS:
        raise DescriptorFormatError("type", f"unknown message type {mtype}")
    lengths: List[int] = []
    q = p
    for _ in range(count):
        n = record_length(body, q, length - q)
        lengths.append(n)
        q += n
    if q != length:
        raise DescriptorFormatError("length", f"{length - q} trailing bytes after {count} descriptors")
    out: list = []
    for n in lengths:
        try:
            out.append(decode_descriptor(body, p, n, ns))
        except DescriptorFormatError as e:
            out.append(refused_record(e, body, p, n))
        p += n
    return sender, out
