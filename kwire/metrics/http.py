"""The Prometheus endpoint (``prometheus.listener=HOST:PORT``): GET /metrics on the Trio loop.

A scrape is rendered on the broker's own Trio thread (``kwire.metrics.collector``
reads broker state between two requests, with no lock and no race), not on
prometheus_client's threaded HTTP server.  The HTTP side is a few lines of
HTTP/1.x, sans-I/O below (``HeadReader``, ``respond``), one request per
connection:

* only ``GET`` or ``HEAD /metrics`` (any query string) is answered, 200 with the
  text exposition format; any other path is 404, another method 405, a request
  line that is not ``METHOD TARGET HTTP/1.x`` 400;
* the request head (request line and headers) may be ``MAX_HEAD_BYTES`` at most
  (431 beyond), must arrive within ``REQUEST_TIMEOUT_S`` and any body is ignored;
* at most ``MAX_CONNECTIONS`` scrape connections are open at once: a new one
  closes the oldest that has not sent its whole head yet (so silent connections
  cannot hold a scraper off until they time out), or is itself closed when every
  open one is being answered;
* the handler catches everything its client can cause, so no HTTP client can
  reach the broker's nursery; a failure to render is a logged 500.
"""
from __future__ import annotations

import collections
import functools
import logging
from typing import Callable

import trio
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from kwire.admin.config_def import split_host_port

from kwire.transport.listener import aclose_quietly, serve_listeners
from kwire.metrics.collector import registry_for

logger = logging.getLogger("kwire.metrics.counters")

PATH = "/metrics"
MAX_HEAD_BYTES = 8192
REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 16
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 500: "Internal Server Error"}


class HttpError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


class HeadReader:
    """Collects a request's head up to the blank line that ends it."""

    def __init__(self, limit: int = MAX_HEAD_BYTES):
        self.limit = limit
        self.buffer = bytearray()

    def feed(self, data: bytes) -> bytes | None:
        """The whole head once it is in, else None.  Raises HttpError(431) past the limit."""
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            end = self.buffer.find(b"\n\n")           # bare LFs, as lenient servers accept
        if end >= 0 and end <= self.limit:
            return bytes(self.buffer[:end])
        if len(self.buffer) > self.limit:
            raise HttpError(431, f"request head longer than {self.limit} bytes")
        return None


def parse_request_line(head: bytes) -> tuple[str, str]:
    """(method, path without query) of a request head.  Raises HttpError(400)."""
    line = head.split(b"\n", 1)[0].rstrip(b"\r")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1.") or not parts[0].isalpha() \
            or not parts[1].startswith(b"/"):
        raise HttpError(400, "not an HTTP/1.x request line")
    try:
        method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise HttpError(400, "request line is not ASCII") from None
    return method, target.split("?", 1)[0]


def response(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", *,
             head_only: bool = False, headers: tuple[str, ...] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
             f"Content-Length: {len(body)}", "Connection: close", *headers, "", ""]
    return "\r\n".join(lines).encode("ascii") + (b"" if head_only else body)


def respond(head: bytes, render: Callable[[], bytes]) -> bytes:
    """The whole response to a request ``head``; ``render()`` makes the exposition.  A
    failing ``render`` is logged and answered 500."""
    try:
        method, path = parse_request_line(head)
    except HttpError as exc:
        return response(exc.status, exc.detail.encode() + b"\n")
    if path != PATH:
        return response(404, f"only {PATH} is served here\n".encode())
    if method not in ("GET", "HEAD"):
        return response(405, b"GET or HEAD only\n", headers=("Allow: GET, HEAD",))
    try:
        body = render()
    except Exception:
        logger.exception("rendering %s failed", PATH)
        return response(500, b"rendering the metrics failed; see the broker's log\n")
    return response(200, body, CONTENT_TYPE_LATEST, head_only=method == "HEAD")


class MetricsEndpoint:
    """Serves one broker's /metrics; ``open`` connections are counted for the cap."""

    def __init__(self, broker):
        registry = registry_for(broker)
        self.render = functools.partial(generate_latest, registry)
        self.open = 0
        # connections still reading their head, oldest first: the ones a newcomer may close
        self._reading: collections.OrderedDict[int, trio.CancelScope] = collections.OrderedDict()

    async def handle(self, stream: trio.SocketStream) -> None:
        """One scrape connection; never raises."""
        if self.open >= MAX_CONNECTIONS:
            if not self._reading:
                await aclose_quietly(stream)
                return
            _key, oldest = self._reading.popitem(last=False)
            oldest.cancel()
        self.open += 1
        scope = trio.move_on_after(REQUEST_TIMEOUT_S)
        key = id(scope)
        self._reading[key] = scope
        try:
            with scope:
                await self._serve(stream, key)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        except Exception:
            logger.exception("a /metrics connection failed")
        finally:
            self._reading.pop(key, None)
            self.open -= 1
            await aclose_quietly(stream)

    async def _serve(self, stream, key: int) -> None:
        reader = HeadReader()
        while True:
            data = await stream.receive_some(4096)
            if not data:
                return                        # gone before a whole head: nothing to answer
            try:
                head = reader.feed(data)
            except HttpError as exc:
                await stream.send_all(response(exc.status, exc.detail.encode() + b"\n"))
                return
            if head is not None:
                break
        self._reading.pop(key, None)         # being answered: a newcomer no longer closes it
        await stream.send_all(respond(head, self.render))


async def serve_metrics(broker, address: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Listen on ``address`` (HOST:PORT) and serve /metrics until cancelled;
    ``task_status.started((host, port))`` with the bound address.  Raises OSError (bind)."""
    host, port = split_host_port(address)
    endpoint = MetricsEndpoint(broker)
    sockets = await trio.open_tcp_listeners(port, host=host or None)
    bound_host, bound_port = sockets[0].socket.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    logger.info("Prometheus metrics at http://%s:%d%s", shown, bound_port, PATH)
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve_listeners, endpoint.handle, sockets,
                                              handler_nursery=nursery))
        task_status.started((bound_host, bound_port))
