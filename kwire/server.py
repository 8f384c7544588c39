"""The Trio server: accepts connections and serves one request at a time on each.

One request in flight per connection: the next frame is read only after the
previous response was written, which keeps responses in request order and
lets TCP push back on a fast producer.  Errors are mapped here, in one place:
``CorruptFrame`` closes that connection only; ``KafkaApiError`` escaping a
handler becomes an error response when the API has a top-level error code,
otherwise the connection is closed; anything else is logged and answered
with UNKNOWN_SERVER_ERROR the same way.
"""
from __future__ import annotations

import dataclasses
import errno
import functools
import os
import logging
import socket

import trio

from kwire.codecs import messages
from kwire.codecs.errors import CorruptFrame, ErrorCode, KafkaApiError
from kwire.codecs.framing import SIZE, FrameBuffer, frame_response, parse_request_header
from kwire.codecs.splice import encode_spliced, parts_size

from . import handlers  # noqa: F401  (registers the handlers)
from .broker import Broker, Endpoint
from .registry import HANDLERS

logger = logging.getLogger("kwire.server")

API_VERSIONS = 18


@dataclasses.dataclass
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str


def _flexible(api_key: int, api_version: int) -> bool | None:
    handler = HANDLERS.get(api_key)
    if handler is None or not handler.min_version <= api_version <= handler.max_version:
        return None
    return messages.request_is_flexible(api_key, api_version)


class Connection:
    def __init__(self, broker: Broker, stream: trio.SocketStream):
        self.broker = broker
        self.stream = stream
        self.frames = FrameBuffer(broker.config.socket_request_max_bytes)
        try:
            host, port = stream.socket.getpeername()[:2]
            self.peer = f"{host}:{port}"
        except OSError:
            self.peer = "?"

    async def read_frame(self) -> bytes | None:
        while True:
            frame = self.frames.next_frame()
            if frame is not None:
                return frame
            data = await self.stream.receive_some(self.frames.bytes_wanted())
            if not data:
                if self.frames.pending():
                    logger.info("%s: connection closed mid-frame (%d bytes pending)", self.peer,
                                self.frames.pending())
                return None
            self.frames.feed(data)

    async def serve(self) -> None:
        while True:
            frame = await self.read_frame()
            if frame is None:
                return
            parts = await self.handle_frame(frame)
            if parts is not None:
                await self.send_parts(parts)

    async def send_parts(self, parts: list) -> None:
        """Send bytes parts as they are and file records with sendfile; releases the files."""
        try:
            for part in parts:
                if isinstance(part, (bytes, bytearray)):
                    await self.stream.send_all(part)
                else:
                    for piece in part.slices:
                        await sendfile_all(self.stream, piece.fd, piece.position, piece.size)
        finally:
            for part in parts:
                if not isinstance(part, (bytes, bytearray)):
                    part.close()

    async def handle_frame(self, frame: bytes) -> bytes | None:
        header = parse_request_header(frame, flexible_for=_flexible)
        handler = HANDLERS.get(header.api_key)
        if handler is None:
            raise CorruptFrame(f"unknown api_key {header.api_key}")
        in_range = handler.min_version <= header.api_version <= handler.max_version
        if header.api_key == API_VERSIONS and not in_range:
            from .handlers.api_versions import unsupported_version_response
            return [frame_response(header.correlation_id, unsupported_version_response(), header_v1=False)]
        if not in_range:
            raise CorruptFrame(f"unsupported version {header.api_version} of "
                               f"{messages.api_name(header.api_key)}")
        request = messages.decode_request(header.api_key, header.api_version, frame, header.body_offset)
        ctx = RequestContext(self.broker, header.api_key, header.api_version, header.correlation_id,
                             header.client_id, self.peer)
        try:
            if header.api_version < handler.reject_below:
                raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION,
                                    f"version {header.api_version} is no longer supported")
            fields = await handler.func(ctx, request)
        except KafkaApiError as exc:
            fields = self.error_fields(header.api_key, header.api_version, request, exc.code, exc.message)
        except (CorruptFrame, trio.Cancelled):
            raise
        except Exception:
            logger.exception("%s: %s v%d failed", self.peer, messages.api_name(header.api_key),
                             header.api_version)
            fields = self.error_fields(header.api_key, header.api_version, request,
                                       ErrorCode.UNKNOWN_SERVER_ERROR, None)
        if fields is None:
            return None
        try:
            parts = encode_spliced(header.api_key, header.api_version, fields)
        except Exception:
            logger.exception("%s: cannot encode the %s v%d response", self.peer,
                             messages.api_name(header.api_key), header.api_version)
            fields = self.error_fields(header.api_key, header.api_version, request,
                                       ErrorCode.UNKNOWN_SERVER_ERROR, None)
            parts = [messages.encode_response(header.api_key, header.api_version, fields)]
        v1 = messages.response_header_v1(header.api_key, header.api_version)
        if len(parts) == 1:
            return [frame_response(header.correlation_id, parts[0], header_v1=v1)]
        head = frame_response(header.correlation_id, b"", header_v1=v1)
        size = len(head) - 4 + parts_size(parts)
        return [SIZE.pack(size) + head[4:] + parts[0], *parts[1:]]

    @staticmethod
    def error_fields(api_key, api_version, request, code, message):
        from .handlers.errors import error_response
        fields = error_response(api_key, request, code, message)
        if fields is None:
            raise CorruptFrame(f"{messages.api_name(api_key)} failed with {code.name}: {message}")
        return fields


async def sendfile_all(stream: trio.SocketStream, fd: int, position: int, size: int) -> None:
    """Stream ``size`` bytes of file ``fd`` from ``position`` to the socket.

    Uses sendfile(2), waiting for writability when the socket buffer is full;
    falls back to pread + send where sendfile is refused.  Cancel-safe only in
    the sense that a cancelled send leaves the connection unusable (it is closed).
    """
    sock = stream.socket
    end = position + size
    while position < end:
        try:
            sent = os.sendfile(sock.fileno(), fd, position, end - position)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            await stream.send_all(os.pread(fd, end - position, position))
            return
        if sent == 0:
            raise trio.BrokenResourceError(f"file ended {end - position} bytes early")
        position += sent


async def handle_connection(broker: Broker, stream: trio.SocketStream) -> None:
    """Serve one client; never lets an exception escape (it would kill the server)."""
    limit = broker.config.max_connections
    if broker.connections >= limit:
        logger.warning("refusing a connection: max.connections=%d reached", limit)
        await stream.aclose()
        return
    broker.connections += 1
    conn = Connection(broker, stream)
    try:
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await conn.serve()
    except CorruptFrame as exc:
        logger.info("%s: closing connection: %s", conn.peer, exc)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except OSError as exc:
        if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
            logger.exception("%s: connection failed", conn.peer)
    except Exception:
        logger.exception("%s: connection failed", conn.peer)
    finally:
        broker.connections -= 1
        with trio.move_on_after(1) as scope:
            scope.shield = True
            try:
                await stream.aclose()
            except Exception:
                pass


async def serve(broker: Broker, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Open the logs, listen, start housekeeping; ``task_status.started((host, port))`` when ready."""
    broker.open()
    try:
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(functools.partial(
                trio.serve_tcp, functools.partial(handle_connection, broker), port, host=host or None,
                handler_nursery=nursery))
            bound_host, bound_port = listeners[0].socket.getsockname()[:2]
            if broker.advertised is None:
                port = broker.config.advertised_port or bound_port
                if broker.config.advertised_port == broker.config.listen_port:
                    port = bound_port  # advertised = listeners, possibly with port 0
                broker.advertised = Endpoint(broker.config.advertised_host or bound_host, port)
            await nursery.start(broker.run_housekeeping)
            await nursery.start(broker.groups.run_timers)
            logger.info("kwire node %d listening on %s:%d (cluster %s)", broker.node_id, bound_host,
                        bound_port, broker.cluster_id)
            task_status.started((bound_host, bound_port))
    finally:
        broker.close()
        logger.info("kwire stopped cleanly")
