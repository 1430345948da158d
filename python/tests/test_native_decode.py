"""The native core's decoder (a receive pass reads the ring and decodes its descriptors in one call) against
format.py's, the reference: for every input both believe the same descriptors, or both refuse naming the same first
bad field, or both refuse the whole message."""
from hypothesis import given, settings, strategies as st

from mstar_transport import Endpoint
from mstar_transport import format as f
from mstar_transport.shm import PeerMailbox, decode_natively
from test_format import NS, descriptors, spec_descriptor


def _both(mtype, body):
    results = []
    for decode in (f.decode_message, decode_natively):
        try:
            sender, items = decode(mtype, body, NS)
            results.append((sender, [("refused", x.field) if isinstance(x, f.DescriptorFormatError) else x
                                     for x in items]))
        except f.DescriptorFormatError:
            results.append("message refused")
    return results


def _agree(mtype, body):
    python, native = _both(mtype, body)
    assert python == native, (python, native, body.hex())
    return python


def test_the_specifications_message_decodes_alike():
    body = f.encode_message("prefill", 1, f.encode_descriptor(spec_descriptor()))
    assert _agree(f.DESCRIPTORS, body) == ("prefill", [spec_descriptor()])


@settings(max_examples=1500, deadline=None)
@given(st.lists(descriptors, min_size=1, max_size=4), st.integers(0, 2000), st.integers(0, 255),
       st.booleans())
def test_a_changed_byte_is_judged_alike(ds, position, value, change):
    body = bytearray(f.encode_message("prefill", len(ds), b"".join(f.encode_descriptor(d) for d in ds)))
    if change:
        body[position % len(body)] = value
    _agree(f.DESCRIPTORS, bytes(body))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400))
def test_garbage_is_judged_alike(body):
    _agree(f.DESCRIPTORS, body)


@settings(max_examples=800, deadline=None)
@given(st.binary(max_size=12))
def test_request_ids_of_any_bytes_are_judged_alike(raw):
    """Python's strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), truncations included."""
    d = f.Descriptor(**{**spec_descriptor().__dict__, "request_id": "x" * len(raw)})
    record = bytearray(f.encode_descriptor(d))
    at = f.SHAPE_OFFSET + 8 * 2 + 2
    record[at:at + len(raw)] = raw
    _agree(f.DESCRIPTORS, f.encode_message("prefill", 1, bytes(record)))


_NAME_PART = st.sampled_from(["", "a", ".", "..", "a.b", "a_b", "_", "A-z.9", "x" * 64, "x" * 65, "é"])
_HEX = st.sampled_from(["", "0a1b2c3d", "0A1B2C3D", "0a1b2c3", "0a1b2c3d4", "zzzzzzzz"])
_INDEX = st.sampled_from(["0", "1234567890", "12345678901", "", "a", "0_1", "007"])
_UUID = st.sampled_from(["0123456789abcdeffedcba9876543210", "0123456789ABCDEFFEDCBA9876543210", "0" * 31,
                         "0" * 33])


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from([NS, f.namespace("/elsewhere"), NS[:15], NS.upper()]), st.sampled_from(["arena", "spill"]),
       _NAME_PART, _NAME_PART, _HEX, _INDEX, _UUID, st.sampled_from([f.PLACEMENT_ARENA, f.PLACEMENT_SPILL]),
       st.sampled_from(["mstar_", "mstar-", ""]))
def test_file_and_producer_names_are_judged_alike(ns, kind, entity, producer, nonce, index, uuid, placement, prefix):
    tail = uuid if kind == "spill" else index
    name = f"{prefix}{ns}_{kind}_{entity}_{nonce}_{tail}"
    try:
        d = f.Descriptor(**{**spec_descriptor().__dict__, "file_name": name, "producer": producer or "p",
                            "placement": placement, "offset": 0 if placement == f.PLACEMENT_SPILL else 4096})
        record = f.encode_descriptor(d)
    except (UnicodeEncodeError, ValueError):
        return  # not encodable as ASCII or too long: the bytes case is the test above's
    _agree(f.DESCRIPTORS, f.encode_message("prefill", 1, record))


def test_more_records_than_the_native_core_holds_are_decoded_in_python_alike(shm_env):
    """A pass of 3 messages of 600 records each: the native core decodes what fits (1024 records, whole messages),
    Python the rest; every record is believed once, in ring order."""
    d = spec_descriptor()
    bodies = []
    for m in range(3):
        records = [f.Descriptor(**{**d.__dict__, "uuid_lsb": 1000 * m + k, "request_id": f"{m}-{k}"})
                   for k in range(600)]
        bodies.append(f.encode_message("prefill", len(records), b"".join(f.encode_descriptor(r) for r in records)))
    with Endpoint.open("ipc:///tmp/mstar.sock", "decode", env={**shm_env, "MSTAR_DEPLOYMENT_TOKEN": "token"}) as ep:
        assert ep.ns == NS  # the namespace of the spec's file names
        peer = PeerMailbox(shm_env["MSTAR_SHM_DIR"], NS, "decode")
        try:
            ends = []
            for body in bodies:
                assert peer.write(f.DESCRIPTORS, body, 0)
                ends.append(peer.last_end)
        finally:
            peer.close()
        got = ep.mailbox.read_decoded(64)
        assert [(mtype, end) for mtype, _, end in got] == [(f.DESCRIPTORS, end) for end in ends]
        assert [decoded for _, decoded, _ in got] == [f.decode_message(f.DESCRIPTORS, body, NS) for body in bodies]
        assert sum(len(items) for _, (_, items), _ in got) == 1800


def _breakers():
    """One way to break each field of the spec's record (F16 [2, 3], arena, offset 4096), by byte."""
    rid_at = f.SHAPE_OFFSET + 16 + 2  # requestId "req-7"
    producer_at = rid_at + 5 + 2  # "prefill"
    file_at = producer_at + 7 + 2
    return {
        "magic": [(0, 0x00)], "version": [(4, 1)], "reserved": [(6, 1)], "flags": [(15, 2)], "dtype": [(12, 99)],
        "placement": [(13, 9)], "rank": [(14, 9)], "shape": [(48 + 7, 0x80)], "nbytes": [(32, 13)],
        "offset": [(40 + 7, 0x80)], "requestId": [(rid_at, 0xFF)], "producer": [(producer_at, ord("/"))],
        "fileName": [(file_at + 1, ord("S"))],
    }


def test_every_two_bad_fields_are_named_in_the_same_order():
    """Each pair of fields broken at once: both decoders name the same one first (the order of section 9)."""
    record = f.encode_descriptor(spec_descriptor())
    breakers = _breakers()
    named = set()
    for a in breakers:
        for b in breakers:
            broken = bytearray(record)
            for at, value in breakers[a] + breakers[b]:
                broken[at] = value
            sender, items = _agree(f.DESCRIPTORS, f.encode_message("prefill", 1, bytes(broken)))
            named.add(items[0][1])
    assert named == set(breakers), "each breaker breaks its own field"


def test_each_part_of_a_file_name_is_judged_alike():
    """A valid segment and spill name, and each of its parts changed in turn."""
    parts = {"prefix": "mstar_", "ns": NS, "kind": None, "entity": "prefill", "nonce": "0a1b2c3d", "tail": None}
    changes = {"prefix": ["mstar-", "", "Mstar_"], "ns": [f.namespace("/elsewhere"), NS[:15], NS.upper(), NS + "0"],
               "entity": ["", ".", "..", "a.b", "a_b", "_", "x" * 64, "x" * 65, "a/b", "a b"],
               "nonce": ["", "0A1B2C3D", "0a1b2c3", "0a1b2c3d4", "zzzzzzzz"],
               "kind": ["arena", "spill", "stats"]}
    tails = {"arena": ["0", "1234567890", "12345678901", "", "a", "0_1", "007"],
             "spill": ["0123456789abcdeffedcba9876543210", "0123456789ABCDEFFEDCBA9876543210", "0" * 31, "0" * 33]}
    accepted = 0
    for kind, placement in (("arena", f.PLACEMENT_ARENA), ("spill", f.PLACEMENT_SPILL)):
        names = []
        base = dict(parts, kind=kind, tail=tails[kind][0])
        for part, values in list(changes.items()) + [("tail", tails[kind])]:
            for value in values:
                p = dict(base, **{part: value})
                names.append(f"{p['prefix']}{p['ns']}_{p['kind']}_{p['entity']}_{p['nonce']}_{p['tail']}")
        for name in names:
            d = f.Descriptor(**{**spec_descriptor().__dict__, "file_name": name, "placement": placement,
                                "offset": 0 if placement == f.PLACEMENT_SPILL else 4096})
            _, items = _agree(f.DESCRIPTORS, f.encode_message("prefill", 1, f.encode_descriptor(d)))
            accepted += isinstance(items[0], f.Descriptor)
    assert accepted > 10  # the valid ones, and those the changes leave valid
