"""Bounded decompression of record-batch payloads (gzip, snappy, lz4, zstd).

A batch is at most max.message.bytes on the wire, but a compressed payload
can claim far more once expanded (a "decompression bomb").  Every decoder
here refuses, with MESSAGE_TOO_LARGE, to produce more than ``limit`` bytes,
and never allocates more than about ``limit`` while finding out:

* gzip (codec 1): zlib streaming with ``max_length``; concatenated gzip
  members are accepted, as Java's GZIPInputStream reads them.
* snappy (2): a raw block states its uncompressed length in its first
  varint, checked before decompressing; the xerial framing the Java client
  uses is a 16-byte header then blocks, each an int32 length + a raw block::

      82 'SNAPPY' 00 | version int32 | compatible int32 | (length int32, raw block)*

* lz4 (3): the LZ4 frame format.  Its header and block headers are walked
  without decompressing; a block holds at most the frame's block maximum
  (64 KiB .. 4 MiB, from the BD byte), so their sum bounds the output::

      magic 04 22 4D 18 | FLG | BD | [content size u64] | [dict id u32] | HC
      (block size u32 LE, high bit = stored; data; [checksum u32])* | 0 | [checksum u32]

* zstd (4): the zstd frame format, walked the same way; a compressed
  block regenerates at most 128 KiB, a raw or RLE block states its size::

      magic 28 B5 2F FD | descriptor | [window] | [dict id] | [content size]
      (block header 3 bytes LE: last bit, type 2 bits, size 21 bits; data)* | [checksum u32]

Skippable lz4/zstd frames (magic 0x184D2A50..5F) are skipped.
Undecodable input raises KafkaApiError(CORRUPT_MESSAGE).
"""
from __future__ import annotations

import struct
import zlib

import cramjam

from .errors import ErrorCode, KafkaApiError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

DECOMPRESSED_FLOOR = 32 << 20      # bytes a batch may expand to, whatever max.message.bytes
DECOMPRESSED_RATIO = 32            # ... or this many times max.message.bytes
DECOMPRESSED_CAP = 256 << 20       # ... but never more

_U32LE = struct.Struct("<I")
_I32 = struct.Struct(">i")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16
_LZ4_MAGIC = 0x184D2204
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 << 10
_LZ4_BLOCK_MAX = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}
_SNAPPY_MAX_RATIO = 32       # a 3-byte copy element yields at most 64 bytes
_LZ4_MAX_RATIO = 256         # each further 255 of a match length costs one byte


def decompressed_limit(max_message_bytes: int) -> int:
    """How many bytes the records of one batch may decompress to."""
    return min(max(DECOMPRESSED_FLOOR, DECOMPRESSED_RATIO * max_message_bytes), DECOMPRESSED_CAP)


class _Corrupt(Exception):
    """Raised inside the frame walkers; mapped to CORRUPT_MESSAGE by ``decompress``."""


def _too_large(limit: int) -> KafkaApiError:
    return KafkaApiError(ErrorCode.MESSAGE_TOO_LARGE,
                         f"records would decompress to more than {limit} bytes")


def decompress(codec: int, data, limit: int) -> bytes:
    """The decompressed payload of a batch using ``codec`` (1-4).

    Raises KafkaApiError: MESSAGE_TOO_LARGE if the output would pass
    ``limit`` bytes, CORRUPT_MESSAGE if ``data`` cannot be decoded.
    """
    try:
        if codec == GZIP:
            out = _gunzip(data, limit)
        elif codec == SNAPPY:
            out = _unsnappy(data, limit)
        elif codec == LZ4:
            if _lz4_bound(data) > limit:
                raise _too_large(limit)
            out = bytes(cramjam.lz4.decompress(data))
        elif codec == ZSTD:
            if _zstd_bound(data) > limit:
                raise _too_large(limit)
            out = bytes(cramjam.zstd.decompress(data))
        else:
            raise _Corrupt(f"unknown codec {codec}")
    except (_Corrupt, zlib.error, cramjam.DecompressionError, struct.error, IndexError,
            ValueError) as exc:
        raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                            f"cannot decompress records: {exc}") from None
    if len(out) > limit:
        raise _too_large(limit)
    return out


def _gunzip(data, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while True:
        inflater = zlib.decompressobj(wbits=31)
        out += inflater.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            raise _too_large(limit)
        if not inflater.eof:
            raise _Corrupt("gzip stream cut short")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def _unsnappy(data, limit: int) -> bytes:
    data = bytes(data)
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, limit)
    out, position = bytearray(), _XERIAL_HEADER
    if len(data) < position:
        raise _Corrupt("xerial snappy header cut short")
    while position < len(data):
        (length,) = _I32.unpack_from(data, position)
        position += 4
        if length < 0 or position + length > len(data):
            raise _Corrupt(f"xerial block length {length}")
        out += _raw_snappy(data[position:position + length], limit - len(out))
        position += length
    return bytes(out)


def _raw_snappy(block: bytes, limit: int) -> bytes:
    claimed = cramjam.snappy.decompress_raw_len(block)
    if claimed > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise _Corrupt(f"a snappy block of {len(block)} bytes cannot hold {claimed} bytes")
    if claimed > limit:
        raise _too_large(limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _skippable(data: bytes, position: int) -> int | None:
    """End of the skippable frame at ``position``, or None if there is none."""
    (magic,) = _U32LE.unpack_from(data, position)
    if magic & 0xFFFFFFF0 != 0x184D2A50:
        return None
    (size,) = _U32LE.unpack_from(data, position + 4)
    return position + 8 + size


def _lz4_bound(data) -> int:
    """Largest output the LZ4 frames in ``data`` can decode to; raises _Corrupt."""
    data, position, bound = bytes(data), 0, 0
    while position < len(data):
        skip_to = _skippable(data, position)
        if skip_to is not None:
            position = skip_to
            continue
        if _U32LE.unpack_from(data, position)[0] != _LZ4_MAGIC:
            raise _Corrupt("not an LZ4 frame")
        flags, bd = data[position + 4], data[position + 5]
        if flags >> 6 != 1 or (bd >> 4) & 7 not in _LZ4_BLOCK_MAX:
            raise _Corrupt("bad LZ4 frame descriptor")
        block_max = _LZ4_BLOCK_MAX[(bd >> 4) & 7]
        block_checksum = 4 if flags & 0x10 else 0
        position += 7 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
        while True:
            (size,) = _U32LE.unpack_from(data, position)
            position += 4
            if size == 0:
                break
            stored, size = size & 0x80000000, size & 0x7FFFFFFF
            if size > block_max:
                raise _Corrupt(f"LZ4 block of {size} bytes, maximum {block_max}")
            bound += size if stored else min(block_max, _LZ4_MAX_RATIO * size + 16)
            position += size + block_checksum
        position += 4 if flags & 0x04 else 0
    if position != len(data):
        raise _Corrupt("LZ4 frame cut short")
    return bound


def _zstd_bound(data) -> int:
    """Largest output the zstd frames in ``data`` can decode to; raises _Corrupt."""
    data, position, bound = bytes(data), 0, 0
    while position < len(data):
        skip_to = _skippable(data, position)
        if skip_to is not None:
            position = skip_to
            continue
        if _U32LE.unpack_from(data, position)[0] != _ZSTD_MAGIC:
            raise _Corrupt("not a zstd frame")
        descriptor = data[position + 4]
        single_segment = descriptor & 0x20
        content_size_bytes = (0, 2, 4, 8)[descriptor >> 6] or (1 if single_segment else 0)
        position += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        position += content_size_bytes
        while True:
            header = data[position] | data[position + 1] << 8 | data[position + 2] << 16
            position += 3
            last, block_type, size = header & 1, (header >> 1) & 3, header >> 3
            if block_type == 3 or (block_type < 2 and size > _ZSTD_BLOCK_MAX):
                raise _Corrupt(f"zstd block of type {block_type} and size {size}")
            if block_type == 1:          # RLE: one byte repeated ``size`` times
                bound, position = bound + size, position + 1
            else:
                bound += size if block_type == 0 else _ZSTD_BLOCK_MAX
                position += size
            if last:
                break
        position += 4 if descriptor & 0x04 else 0
    if position != len(data):
        raise _Corrupt("zstd frame cut short")
    return bound


def compress(codec: int, data) -> bytes:
    """``data`` compressed as a batch payload of ``codec`` (1-4), in the framing every client
    reads: gzip, snappy in xerial framing (Java's and librdkafka's), the LZ4 frame format,
    a zstd frame.  Used when the broker rewrites a batch (the log cleaner)."""
    data = bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        out = bytearray(_XERIAL_MAGIC + _I32.pack(1) + _I32.pack(1))
        for start in range(0, len(data) or 1, 32 << 10):      # xerial's 32 KiB blocks
            block = bytes(cramjam.snappy.compress_raw(data[start:start + (32 << 10)]))
            out += _I32.pack(len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"no compression codec {codec}")
