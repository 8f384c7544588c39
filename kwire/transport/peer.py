"""A connection from this broker to another one, for replication.

Requests and responses are kafka-python's classes generated from Kafka's
JSON specs (``kwire.codecs.messages.API_CLASSES``): nothing is encoded by
hand.  Framing on the wire::

    request   int32 size | request header (v1, or v2 when flexible) | body
    response  int32 size | int32 correlation_id | [tagged fields when flexible] | body

One request in flight at a time, as Kafka's replica fetcher does.  This is the
PLAINTEXT connection; kwire.security.peer adds TLS and SASL on top of it for the
other inter-broker protocols.
"""
from __future__ import annotations

import logging
import struct
from types import SimpleNamespace

import trio

from kwire.codecs.messages import API_CLASSES

from kwire.transport.lowat import RCVLOWAT_MAX, set_rcvlowat

SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 512 * 1024 * 1024     # a peer's response larger than this is a protocol error


def _namespaces(value):
    """Nested request structs as attribute objects: kafka-python's encoder reads attributes."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _namespaces(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespaces(v) for v in value]
    return value


class PeerError(Exception):
    """The peer closed the connection, answered garbage, or did not answer in time.

    ``log_level`` is how loud a caller that retries should log it: INFO for what a restart
    of the peer explains, WARNING for what only the configuration can mend (a refused
    certificate or login)."""

    def __init__(self, message: str, log_level: int = logging.INFO):
        super().__init__(message)
        self.log_level = log_level


class PeerConnection:
    """``await PeerConnection.open(host, port, client_id)``; then ``await request(api_key, version, **fields)``."""

    def __init__(self, stream: trio.SocketStream, client_id: str, timeout_s: float):
        self.stream = stream
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation_id = 0

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float = 30.0) -> "PeerConnection":
        """Raises PeerError when the peer cannot be reached within ``timeout_s``."""
        try:
            with trio.fail_after(timeout_s):
                stream = await trio.open_tcp_stream(host, port)
        except (OSError, trio.TooSlowError) as exc:
            raise PeerError(f"cannot connect to {host}:{port}: {exc}") from None
        return cls(stream, client_id, timeout_s)

    async def request(self, api_key: int, version: int, wait_s: float = 0.0, **fields):
        """Send one request and return the decoded response object.

        ``wait_s`` is how long the peer may legitimately hold the request (a
        long-poll fetch), added to the socket timeout.  Raises PeerError.
        Not cancel-safe for the connection: close it after a cancellation.
        """
        request_class, response_class = API_CLASSES[api_key]
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        req = request_class[version](**{k: _namespaces(v) for k, v in fields.items()})
        req.with_header(correlation_id=self._correlation_id, client_id=self.client_id)
        try:
            with trio.fail_after(self.timeout_s + wait_s):
                await self.stream.send_all(req.encode(header=True, framed=True))
                frame = await self._receive_frame()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError) as exc:
            raise PeerError(f"request {request_class.__name__} v{version} failed: {exc!r}") from None
        try:
            # a view: kafka-python's decoder copies a bytes field once from a view, twice from a bytearray
            response = response_class.decode(memoryview(frame), version=version, header=True)
        except Exception as exc:      # kafka-python's decoder leaks struct.error / IndexError
            raise PeerError(f"undecodable {response_class.__name__} v{version}: {exc!r}") from None
        if response._header.correlation_id != self._correlation_id:
            raise PeerError("response correlation id does not match the request")
        return response

    async def _receive_frame(self) -> bytearray:
        """One response frame, read straight into a buffer of its size (one request is in
        flight, so nothing follows it): a follower's fetch responses are megabytes, and
        each copy of them costs as much as writing them to the log."""
        (size,) = SIZE.unpack(await self._receive_exactly(4))
        if size < 4 or size > MAX_RESPONSE_BYTES:
            raise PeerError(f"response frame of {size} bytes")
        return await self._receive_exactly(size)

    async def _receive_exactly(self, n: int) -> bytearray:
        buffer = bytearray(n)
        view = memoryview(buffer)
        sock = self.stream.socket
        got = 0
        lowat = 1                     # kwire.transport.lowat: wake once most of the frame is queued
        try:
            while got < n:
                wanted = min(n - got, RCVLOWAT_MAX)
                if wanted != lowat:
                    lowat = set_rcvlowat(sock, wanted)
                count = await sock.recv_into(view[got:])
                if not count:
                    raise PeerError("the peer closed the connection")
                got += count
        finally:
            if lowat != 1:
                set_rcvlowat(sock, 1)
        return buffer

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.stream.aclose()

