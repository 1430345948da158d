"""The codecs against docs/format.md's golden blocks (the same bytes FormatSpecTest holds the JVM to), and
hypothesis round trips and hostile inputs: a decoder raises DescriptorFormatError naming a field, never another
exception."""
import struct
import uuid

import pytest
from hypothesis import given, settings, strategies as st

from conftest import golden_bytes, golden_values
from mstar_transport import format as f

NS = f.namespace("ipc:///tmp/mstar.sock", "token")
UUID_1 = (0x0123456789abcdef, f._i64(0xfedcba9876543210))
UUID_2 = (0x1111111111111111, 0x2222222222222222)


def spec_descriptor():
    return f.Descriptor(UUID_1[0], UUID_1[1], "req-7", "prefill", f.DTYPE_CODES["F16"], (2, 3), 12,
                        f.PLACEMENT_ARENA, f.segment_name(NS, "prefill", "0a1b2c3d", 0), 4096)


def test_names_are_the_specifications():
    names = golden_values("names")
    assert names["namespace"] == NS
    assert names["namespace-without-token"] == f.namespace("/tmp/mstar.sock")
    assert names["segment"] == f.segment_name(NS, "prefill", "0a1b2c3d", 0)
    assert names["spill"] == f.spill_name(NS, "prefill", "0a1b2c3d", uuid.UUID("01234567-89ab-cdef-fedc-ba9876543210"))
    assert names["mailbox"] == f.mailbox_name(NS, "decode")
    assert names["stats"] == f.stats_name(NS, "prefill", "0a1b2c3d")
    assert names["budget"] == f.budget_name(NS)


def test_the_layout_constants_are_the_specifications():
    layout = golden_values("mailbox-file")
    assert (f.RING_BYTES, f.HANDLED_OFFSET, f.INCARNATION_OFFSET, f.SLEEPING_OFFSET, f.VERSION_OFFSET,
            f.WRITERS_OFFSET, f.WRITER_SLOTS, f.MAILBOX_FILE_BYTES) == tuple(
        int(layout[k]) for k in ("ring", "handled", "incarnation", "sleeping", "version", "writers", "writer-slots",
                                 "file"))
    assert (f.DESCRIPTORS, f.ACKS, f.REFUSALS, f.KEPT) == tuple(int(layout["type-" + k]) for k in
                                                               ("descriptors", "acks", "refusals", "kept"))
    assert f.FLAG_POSITION == int(layout["flag-position"])
    trailer = golden_values("ring-trailer")
    assert (f.TAIL_OFFSET, f.HEAD_CACHE_OFFSET, f.HEAD_OFFSET, f.CORRELATION_OFFSET, f.RING_TRAILER_BYTES) == tuple(
        int(trailer[k]) for k in ("tail", "head-cache", "head", "correlation", "length"))
    assert f.HANDLED_OFFSET == f.RING_BYTES + int(trailer["correlation"])  # the handled position is the trailer's
    versions = golden_values("versions")
    assert (int(versions["descriptor"]), int(versions["mailbox"])) == (f.DESCRIPTOR_VERSION, f.MAILBOX_VERSION)


def test_the_descriptor_record_is_the_specifications():
    record = golden_bytes("descriptor-record")
    assert f.encode_descriptor(spec_descriptor()) == record
    assert f.decode_descriptor(record, 0, len(record), NS) == spec_descriptor()


def test_the_flags_byte_carries_position_and_refuses_unknown_bits():
    record = bytearray(golden_bytes("descriptor-record"))
    assert record[15] == 0
    record[15] = f.FLAG_POSITION
    d = f.decode_descriptor(record, 0, len(record), NS)
    assert d.flags == f.FLAG_POSITION and d.by_position
    assert f.encode_descriptor(d) == bytes(record)
    for bad in (2, 0x80, 0xFF):
        record[15] = bad
        with pytest.raises(f.DescriptorFormatError) as e:
            f.decode_descriptor(record, 0, len(record), NS)
        assert e.value.field == "flags"
    record[15] = 0
    record[6] = 1  # the u16 after the version
    with pytest.raises(f.DescriptorFormatError) as e:
        f.decode_descriptor(record, 0, len(record), NS)
    assert e.value.field == "reserved"
    record[6] = 0
    record[4] = 1  # a format 1 record
    with pytest.raises(f.DescriptorFormatError) as e:
        f.decode_descriptor(record, 0, len(record), NS)
    assert e.value.field == "version" and "found 1" in str(e.value)


def test_a_kept_message_is_laid_out_as_acks():
    body = f.encode_message("decode", 2, f.encode_uuids([UUID_1, UUID_2]))
    assert f.decode_message(f.KEPT, body, NS) == ("decode", [UUID_1, UUID_2])
    with pytest.raises(f.DescriptorFormatError):
        f.decode_message(f.KEPT, body[:-1], NS)


def test_the_messages_are_the_specifications():
    record = f.encode_descriptor(spec_descriptor())
    assert f.encode_message("prefill", 1, record) == golden_bytes("descriptors-message")
    acks = f.encode_message("decode", 2, f.encode_uuids([UUID_1, UUID_2]))
    assert acks == golden_bytes("acks-message")
    assert f.decode_message(f.ACKS, acks, NS) == ("decode", [UUID_1, UUID_2])
    assert f.decode_message(f.DESCRIPTORS, golden_bytes("descriptors-message"), NS) == ("prefill", [spec_descriptor()])


def test_the_slot_stamp_is_the_specifications():
    slot = golden_bytes("slot-stamp")
    assert f.stamp_at(0, 13) == 16 and f.slot_bytes(13) == len(slot)
    assert struct.unpack_from("<qq", slot, 16) == UUID_1


descriptors = st.builds(
    lambda msb, lsb, rid, producer, code, shape, spill, nonce, index, flags: f.Descriptor(
        msb, lsb, rid, producer, code, tuple(shape), _nbytes(code, shape), f.PLACEMENT_SPILL if spill else
        f.PLACEMENT_ARENA,
        f.spill_name(NS, producer, nonce, uuid.UUID(int=(msb & (2**64 - 1)) << 64 | lsb & (2**64 - 1))) if spill
        else f.segment_name(NS, producer, nonce, index), 0 if spill else 256 * index, flags),
    st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
    st.text(max_size=60).filter(lambda s: len(s.encode("utf-8")) <= 256),
    st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,40}", fullmatch=True),
    st.sampled_from(sorted(f.DTYPES)), st.lists(st.integers(0, 100), max_size=8), st.booleans(),
    st.from_regex(r"[0-9a-f]{8}", fullmatch=True), st.integers(0, 10_000), st.sampled_from([0, f.FLAG_POSITION]))


def _nbytes(code, shape):
    n = f.DTYPES[code][1]
    for d in shape:
        n *= d
    return n


@settings(max_examples=300, deadline=None)
@given(descriptors)
def test_a_descriptor_round_trips(d):
    record = f.encode_descriptor(d)
    assert f.record_length(record, 0, len(record)) == len(record)
    assert f.decode_descriptor(record, 0, len(record), NS) == d


@settings(max_examples=500, deadline=None)
@given(descriptors, st.integers(0, 400), st.integers(0, 255))
def test_a_changed_byte_is_refused_by_name_or_decodes_to_a_valid_descriptor(d, position, value):
    record = bytearray(f.encode_descriptor(d))
    record[position % len(record)] = value
    try:
        got = f.decode_descriptor(record, 0, len(record), NS)
    except f.DescriptorFormatError as e:
        assert e.field in {"magic", "version", "reserved", "flags", "length", "dtype", "placement", "rank", "shape", "nbytes",
                           "offset", "requestId", "producer", "fileName"}
        return
    assert f.encode_descriptor(got) == bytes(record)  # what it believed is exactly what it was given


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.sampled_from([f.DESCRIPTORS, f.ACKS, f.REFUSALS, f.KEPT, 9]))
def test_garbage_messages_raise_only_format_errors(body, mtype):
    try:
        f.decode_message(mtype, body, NS)
    except f.DescriptorFormatError:
        pass


def test_a_record_of_another_namespace_is_refused():
    d = spec_descriptor()
    record = f.encode_descriptor(d)
    with pytest.raises(f.DescriptorFormatError) as e:
        f.decode_descriptor(record, 0, len(record), f.namespace("/elsewhere"))
    assert e.value.field == "fileName"
