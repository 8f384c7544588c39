"""The one varint implementation and reader (codecs/primitives.py), and its hot-path twins."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kwire.codecs import primitives as P
from kwire.codecs import validation
from kwire.codecs.errors import CorruptFrame

EDGES = [0, 1, -1, 63, -64, 64, -65, 127, 128, 8191, -8192, 8192, 2**31 - 1, -2**31,
         2**32, 2**63 - 1, -2**63]


@pytest.mark.parametrize("n", EDGES + list(range(-300, 300)))
def test_varint_round_trip_and_hot_path_twin_agree(n):
    data = P.varint(n)
    assert P.read_varint(data, 0) == (n, len(data))
    assert P.read_varint(b"x" + data + b"tail", 1) == (n, 1 + len(data))
    assert validation._varint(data, 0, len(data)) == (n, len(data))
    if len(data) == 1:
        assert validation._ZIGZAG[data[0]] == n


@given(st.integers(-2**63, 2**63 - 1))
def test_varint_any_long(n):
    data = P.varint(n)
    assert P.read_varint(data, 0) == validation._varint(data, 0, len(data)) == (n, len(data))


@given(st.integers(0, 2**35 - 1))
def test_uvarint_round_trip(n):
    data = P.uvarint(n)
    assert P.read_uvarint(data, 0) == (n, len(data))
    assert len(data) == max(1, (n.bit_length() + 6) // 7)


def test_known_bytes():
    assert P.uvarint(0) == b"\x00" and P.uvarint(300) == b"\xac\x02"
    assert P.varint(-1) == b"\x01" and P.varint(1) == b"\x02" and P.varint(-65) == b"\x81\x01"


def test_malformed_varints_raise_corrupt_frame():
    with pytest.raises(CorruptFrame, match="past the end"):
        P.read_uvarint(b"\x80", 0)
    with pytest.raises(CorruptFrame, match="too long"):
        P.read_uvarint(b"\xff" * 5 + b"\x01", 0)
    with pytest.raises(CorruptFrame, match="past the end"):
        P.read_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptFrame, match="too long"):
        P.read_varint(b"\xff" * 10 + b"\x01", 0)


class _Err(ValueError):
    pass


class _R(P.Reader):
    error = _Err
    __slots__ = ()


def test_reader_reads_every_primitive():
    import uuid
    tid = uuid.uuid4()
    data = (b"\x01" + P.INT16.pack(-2) + P.UINT16.pack(65535) + P.INT32.pack(7) + P.INT64.pack(-8)
            + tid.bytes + P.uvarint(300) + P.varint(-300) + P.INT16.pack(2) + b"ab" + P.INT16.pack(-1)
            + P.uvarint(3) + b"cd" + b"\x00" + P.INT32.pack(2) + b"ef" + P.uvarint(2) + b"g"
            + P.INT32.pack(1) + P.uvarint(2) + b"\x01" + b"\x05\x02" + b"hi")
    r = _R(data)
    assert (r.int8(), r.int16(), r.uint16(), r.int32(), r.int64()) == (1, -2, 65535, 7, -8)
    assert (r.uuid(), r.uvarint(), r.varint()) == (tid, 300, -300)
    assert (r.string(), r.nullable_string(), r.compact_string(), r.compact_nullable_string()) == (
        "ab", None, "cd", None)
    assert (r.bytes_(), r.compact_bytes(), r.array_len(), r.compact_array_len()) == (b"ef", b"g", 1, 1)
    assert {k: bytes(v) for k, v in r.tagged_fields().items()} == {5: b"hi"}
    r.end()


@pytest.mark.parametrize("data, call, message", [
    (b"\x00", "int16", "truncated"),
    (b"\xff\xff", "string", "null string"),
    (b"\x00\x01\xff", "string", "UTF-8"),
    (b"\x00\x00\x00\x09", "array_len", "array length"),
    (b"\xff\xff\xff\xff", "array_len", "array length"),
    (b"\xff\xff\xff\xff\xff\x01", "uvarint", "varint too long"),
    (b"\x80", "uvarint", "varint runs past"),
    (b"\x00", "compact_string", "null string"),
])
def test_reader_raises_its_error(data, call, message):
    with pytest.raises(_Err, match=message):
        getattr(_R(data), call)()


def test_reader_end_rejects_trailing_bytes():
    r = _R(b"\x00\x01\x02")
    r.int16()
    with pytest.raises(_Err, match="1 trailing"):
        r.end()
