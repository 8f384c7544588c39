"""Encode a response whose record fields are sent later from files (sendfile).

A field value may be a *deferred* object with a ``size`` attribute (the
number of record bytes it stands for).  ``encode_spliced`` encodes the body
with a short marker in its place, then cuts the body at each marker and
rewrites the length prefix in front of it, giving a list of parts: ``bytes``
to send as they are and the deferred objects to stream in their place.

Byte layout around one records field::

    non-flexible versions:  int32 length        | record bytes
    flexible versions:      uvarint(length + 1) | record bytes

The marker is 8 bytes starting 0xFE 0xED, which no topic name (ASCII) and no
other field of a Fetch response produces in practice; markers are found in
order, each after the previous one.
"""
from __future__ import annotations

import struct

from . import messages

_MARK = b"\xfe\xedKW"


def _marker(i: int) -> bytes:
    return _MARK + struct.pack(">I", i)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _substitute(value, deferred: list):
    if isinstance(value, dict):
        return {k: _substitute(v, deferred) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, deferred) for v in value]
    if hasattr(value, "size") and not isinstance(value, (bytes, bytearray, memoryview, int, str)):
        deferred.append(value)
        return _marker(len(deferred) - 1)
    return value


def encode_spliced(api_key: int, api_version: int, fields: dict) -> list:
    """Encode ``fields``; returns parts: bytes and the deferred objects in wire order."""
    deferred: list = []
    body = messages.encode_response(api_key, api_version, _substitute(fields, deferred))
    if not deferred:
        return [body]
    flexible = messages.response_class(api_key).flexible_version_q(api_version)
    parts: list = []
    at = 0
    for i, item in enumerate(deferred):
        mark = body.index(_marker(i), at)
        if flexible:
            prefix_len = len(uvarint(len(_marker(i)) + 1))
            prefix = uvarint(item.size + 1)
        else:
            prefix_len = 4
            prefix = struct.pack(">i", item.size)
        parts.append(body[at:mark - prefix_len] + prefix)
        if item.size:
            parts.append(item)
        at = mark + len(_marker(i))
    parts.append(body[at:])
    return parts


def parts_size(parts: list) -> int:
    return sum(len(p) if isinstance(p, (bytes, bytearray)) else p.size for p in parts)
