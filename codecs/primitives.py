"""Kafka's primitive types: the one varint implementation and the one bounds-checked reader.

Every kwire module that writes or reads varints, strings, arrays or tagged fields
uses this module.  The one exception is the Produce validation hot path:
``validation._varint`` and its one-byte table ``_ZIGZAG`` are twins of
``read_varint`` kept inline for speed; ``tests/codecs/test_primitives.py``
checks they agree.

Byte layout (big-endian)::

    int8 int16 uint16 int32 int64   fixed width, two's complement (uint16 unsigned)
    uvarint          7 bits a byte, low group first, high bit set = more follows;
                     Kafka's unsigned varint is 32-bit, so at most 5 bytes are read
    varint           zigzag ((n << 1) ^ (n >> 63)), then as a uvarint of up to 10 bytes
                     (Kafka's varint and varlong: record lengths, deltas, key/value sizes)
    string           int16 length N (-1 = null) | N bytes of UTF-8
    compact string   uvarint N + 1 (0 = null) | N bytes of UTF-8
    bytes            int32 length N (-1 = null) | N bytes
    compact bytes    uvarint N + 1 (0 = null) | N bytes
    array            int32 count (-1 = null) | the elements
    compact array    uvarint count + 1 (0 = null) | the elements
    uuid             16 bytes
    tagged fields    uvarint count | per field: uvarint tag | uvarint size | size bytes

``Reader`` raises its class attribute ``error`` (``CorruptFrame`` here; each
record module subclasses it with its own ``ValueError``) for every malformed
input: truncation, trailing bytes, a count the bytes left cannot hold, bad
UTF-8, a varint too long.  A length prefix can never make it allocate more
than the input holds.
"""
from __future__ import annotations

import struct
import uuid as _uuid

from .errors import CorruptFrame

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
assert (INT8.size, INT16.size, UINT16.size, INT32.size, INT64.size) == (1, 2, 2, 4, 8)

_UVARINT_1 = [bytes((i,)) for i in range(0x80)]


def uvarint(n: int) -> bytes:
    """An unsigned varint (flexible-version lengths, counts and tags); ``n`` >= 0."""
    if n < 0x80:
        return _UVARINT_1[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint(n: int) -> bytes:
    """A zigzag varint of a signed 64-bit ``n`` (Kafka's ByteUtils.writeVarlong)."""
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``: ``(value, next position)``.

    Raises ``CorruptFrame`` past the end of ``buf`` or after 5 bytes.
    """
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptFrame("varint runs past the end of the frame")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise CorruptFrame("varint too long")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint (up to 64 bits) at ``pos``: ``(value, next position)``.

    Raises ``CorruptFrame`` past the end of ``buf`` or after 10 bytes.
    """
    value = shift = 0
    try:
        while True:
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (value >> 1) ^ -(value & 1), pos
            shift += 7
            if shift > 63:
                raise CorruptFrame("varint too long")
    except IndexError:
        raise CorruptFrame("varint runs past the end of the frame") from None


class Reader:
    """A bounds-checked cursor over one key, value or struct.

    Subclasses set ``error`` to the exception every failure raises.  ``data`` is a
    memoryview of the input and ``pos`` the next byte to read.
    """

    error: type[Exception] = CorruptFrame
    __slots__ = ("data", "pos")

    def __init__(self, data):
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise self.error(f"record truncated at byte {self.pos} (wanted {n})")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: struct.Struct) -> tuple:
        return fmt.unpack(self.take(fmt.size))

    def int8(self) -> int:
        return INT8.unpack(self.take(1))[0]

    def int16(self) -> int:
        return INT16.unpack(self.take(2))[0]

    def uint16(self) -> int:
        return UINT16.unpack(self.take(2))[0]

    def int32(self) -> int:
        return INT32.unpack(self.take(4))[0]

    def int64(self) -> int:
        return INT64.unpack(self.take(8))[0]

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=bytes(self.take(16)))

    def uvarint(self) -> int:
        try:
            n, self.pos = read_uvarint(self.data, self.pos)
        except CorruptFrame as exc:
            raise self.error(f"{exc} at byte {self.pos}") from None
        return n

    def varint(self) -> int:
        try:
            n, self.pos = read_varint(self.data, self.pos)
        except CorruptFrame as exc:
            raise self.error(f"{exc} at byte {self.pos}") from None
        return n

    def text(self, n: int) -> str:
        """``n`` bytes of UTF-8."""
        try:
            return bytes(self.take(n)).decode()
        except UnicodeDecodeError as e:
            raise self.error(f"bad UTF-8 before byte {self.pos}") from e

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        return self.text(n)

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise self.error(f"null string at byte {self.pos}")
        return s

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n == -1 else self.text(n)

    def compact_string(self) -> str:
        s = self.compact_nullable_string()
        if s is None:
            raise self.error(f"null string at byte {self.pos}")
        return s

    def bytes_(self) -> bytes:
        """Classic bytes; a null (-1) reads as empty."""
        n = self.int32()
        return b"" if n == -1 else bytes(self.take(n))

    def compact_bytes(self) -> bytes:
        """Compact bytes; a null (0) reads as empty."""
        n = self.uvarint() - 1
        return b"" if n == -1 else bytes(self.take(n))

    def count(self, n: int, min_size: int = 1, nullable: bool = False) -> int | None:
        """Check an array length: -1 is null where allowed (``None``); each element takes
        at least ``min_size`` bytes, so a count can never promise more than the bytes left."""
        if n == -1 and nullable:
            return None
        if n < 0 or n * min_size > len(self.data) - self.pos:
            raise self.error(f"bad array length {n} at byte {self.pos}")
        return n

    def array_len(self, min_size: int = 1) -> int:
        return self.count(self.int32(), min_size)

    def compact_array_len(self, min_size: int = 1) -> int:
        """A compact array's count; a null array counts as empty."""
        return self.count(self.uvarint() - 1, min_size, nullable=True) or 0

    def tagged_fields(self) -> dict[int, memoryview]:
        """The tagged-field section: tag -> raw bytes (unknown tags are the caller's to skip)."""
        fields = {}
        for _ in range(self.count(self.uvarint(), 2)):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def end(self) -> None:
        if self.pos != len(self.data):
            raise self.error(f"{len(self.data) - self.pos} trailing byte(s)")
