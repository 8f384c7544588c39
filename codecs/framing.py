"""Request framing and the request header, sans-I/O.

Byte layout of one request on the wire::

    int32   size                  bytes that follow (bounded by socket.request.max.bytes)
    int16   request_api_key
    int16   request_api_version
    int32   correlation_id
    int16   client_id length      -1 = null; client_id is never a compact string
    bytes   client_id
    [header v2 only: tagged fields (unsigned varint count, then tag/size/data)]
    bytes   request body          decoded by kafka-python's generated codec

A response is ``int32 size, int32 correlation_id, [tagged fields if the
response header is v1], body``.  ApiVersions responses always use header v0.

``FrameBuffer`` accumulates bytes and yields complete frames; the size
limit is checked from the 4-byte prefix before any payload is buffered, and
a frame's body is read into one buffer of the announced size (no copies).
"""
from __future__ import annotations

import dataclasses
import struct

from .errors import CorruptFrame
from .primitives import read_uvarint

SIZE = struct.Struct(">i")
HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id len
assert HEADER_FIXED.size == 10


class FrameTooLarge(CorruptFrame):
    """A length prefix exceeded the configured maximum (or was negative)."""


class FrameBuffer:
    """Splits a byte stream into frames without ever buffering past ``max_size``.

    Each frame goes through two phases.  Its 4-byte prefix is collected in a
    small head buffer (which may also hold the start of later, pipelined
    frames); once the prefix is known (``announced()``), the body lives in
    one preallocated ``bytearray`` of exactly the announced size, so a large
    frame is never grown, sliced or copied again.  A caller owning a socket
    reads the body straight into ``body_view()`` (``recv_into``) and reports
    ``filled(n)``; ``feed(data)`` copies bytes in for callers that have bytes.
    ``next_frame()`` returns the body (a ``bytearray``, prefix excluded) or
    ``None`` when more bytes are needed.

    ``announced()`` and ``next_frame()`` raise ``FrameTooLarge`` as soon as a
    prefix announces an oversized or negative frame, before any body byte is
    allocated.
    """

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._head = bytearray()
        self._size: int | None = None       # announced size of the current frame
        self._body: bytearray | None = None
        self._filled = 0

    def feed(self, data) -> None:
        """Add received bytes (any buffer); copies them into the body when one is allocated."""
        if self._body is not None:
            take = min(len(data), len(self._body) - self._filled)
            self._body[self._filled:self._filled + take] = memoryview(data)[:take]
            self._filled += take
            data = memoryview(data)[take:]
        if len(data):
            self._head += data

    def pending(self) -> int:
        """How many bytes are buffered but not yet returned as a frame."""
        prefix = SIZE.size if self._size is not None else 0
        return prefix + len(self._head) + self._filled

    def announced(self) -> int | None:
        """The size of the current frame once its prefix has arrived, else None.

        Raises ``FrameTooLarge`` for a negative size or one above ``max_size``.
        """
        if self._size is None:
            if len(self._head) < SIZE.size:
                return None
            (size,) = SIZE.unpack_from(self._head, 0)
            if size < 0 or size > self.max_size:
                raise FrameTooLarge(f"frame of {size} bytes exceeds the {self.max_size} byte limit")
            del self._head[:SIZE.size]
            self._size = size
        return self._size

    def body_view(self) -> memoryview:
        """A writable view of the part of the current frame's body still to arrive.

        Allocates the body on first use and moves already buffered bytes into
        it.  Raises RuntimeError before the prefix has arrived (``announced()``
        is None) and FrameTooLarge as ``announced()`` does.
        """
        size = self.announced()
        if size is None:
            raise RuntimeError("body_view() before the frame size is known")
        if self._body is None:
            self._body = bytearray(size)
            take = min(size, len(self._head))
            self._body[:take] = memoryview(self._head)[:take]
            del self._head[:take]
            self._filled = take
        return memoryview(self._body)[self._filled:]

    def filled(self, n: int) -> None:
        """``n`` bytes were written at the start of the last ``body_view()``."""
        self._filled += n

    def next_frame(self) -> bytearray | None:
        size = self.announced()
        if size is None:
            return None
        if self._body is None:
            if len(self._head) < size:
                return None
            self.body_view()
        if self._filled < size:
            return None
        frame = self._body
        self._size, self._body, self._filled = None, None, 0
        return frame


@dataclasses.dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int = 0


def parse_request_header(frame: bytes, *, flexible_for) -> RequestHeader:
    """Parse the request header of ``frame``.

    ``flexible_for(api_key, api_version) -> bool | None`` tells whether the
    request uses header v2 (None for an unknown API/version, which is then
    parsed as header v1 so the caller can still answer or close).
    Raises ``CorruptFrame`` on malformed bytes.
    """
    if len(frame) < HEADER_FIXED.size:
        raise CorruptFrame(f"request header needs {HEADER_FIXED.size} bytes, frame has {len(frame)}")
    api_key, api_version, correlation_id, n = HEADER_FIXED.unpack_from(frame, 0)
    pos = HEADER_FIXED.size
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise CorruptFrame("client_id runs past the end of the frame")
        try:
            client_id = frame[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptFrame("client_id is not UTF-8") from exc
        pos += n
    elif n != -1:
        raise CorruptFrame(f"invalid client_id length {n}")
    if flexible_for(api_key, api_version):
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise CorruptFrame("tagged field runs past the end of the frame")
    return pos


def frame_response(correlation_id: int, body: bytes, *, header_v1: bool) -> bytes:
    """Prefix ``body`` with the response header and the frame size."""
    head = b"\x00" if header_v1 else b""
    size = 4 + len(head) + len(body)
    return b"".join((SIZE.pack(size), SIZE.pack(correlation_id), head, body))
