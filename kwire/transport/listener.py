"""Accept loops for the broker's listening sockets, quiet when descriptors run out.

``trio.serve_listeners`` logs a traceback at ERROR every 100 ms while
accept(2) fails with EMFILE (the process is out of file descriptors).  Here
the first failure of an episode gets one WARNING, a still-starved listener
at most one more per ``WARN_INTERVAL_S``, and the end of the episode one
INFO line; accept is retried every ``RETRY_S`` so the listener serves again
as soon as a descriptor is free.  Connections that arrive meanwhile wait in
the kernel's accept backlog.
"""
from __future__ import annotations

import errno
import logging
import math
import os

import trio

logger = logging.getLogger("kwire.server.connection")

# accept(2) errors meaning "overloaded for now", as trio lists them.
CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
RETRY_S = 0.1
WARN_INTERVAL_S = 60.0


class _Starvation:
    """One listener's current run of capacity errors, for rate-limited logging."""

    def __init__(self, address: str):
        self.address = address
        self.since: float | None = None
        self.retries = 0
        self.last_warning = -math.inf

    def failed(self, exc: OSError, open_connections) -> None:
        now = trio.current_time()
        if self.since is None:
            self.since, self.retries = now, 0
        self.retries += 1
        if now - self.last_warning >= WARN_INTERVAL_S:
            self.last_warning = now
            logger.warning("%s: cannot accept connections: %s (%s) with %s connections open; "
                           "retrying every %d ms until descriptors are freed (raise the open-file limit, "
                           "ulimit -n, or lower max.connections)", self.address,
                           errno.errorcode.get(exc.errno, exc.errno), os.strerror(exc.errno),
                           open_connections(), RETRY_S * 1000)

    def accepted(self) -> None:
        if self.since is not None:
            logger.info("%s: accepting connections again after %.1f s (%d retries)", self.address,
                        trio.current_time() - self.since, self.retries)
            self.since = None
            self.last_warning = -math.inf


async def accept_loop(listener: trio.SocketListener, handler, handler_nursery: trio.Nursery,
                      open_connections=lambda: "?") -> None:
    """Accept connections for ever, starting ``handler(stream)`` in ``handler_nursery`` for each.

    Raises only what accept raises besides the capacity errors (the listener
    is broken).  ``open_connections()`` is reported in the warning.
    """
    try:
        host, port = listener.socket.getsockname()[:2]
        starvation = _Starvation(f"{host}:{port}")
    except OSError:
        starvation = _Starvation("listener")
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in CAPACITY_ERRNOS:
                    raise
                starvation.failed(exc, open_connections)
                await trio.sleep(RETRY_S)
                continue
            starvation.accepted()
            handler_nursery.start_soon(handler, stream)


async def aclose_quietly(stream, timeout: float = 1.0) -> None:
    """Close an accepted connection, shielded from cancellation and for ``timeout`` s at
    most (a TLS close may wait on its peer); a failure to close is nobody's business."""
    with trio.move_on_after(timeout) as scope:
        scope.shield = True
        try:
            await stream.aclose()
        except Exception:
            pass


async def serve_listeners(handler, listeners: list[trio.SocketListener], *, handler_nursery: trio.Nursery,
                          open_connections=lambda: "?",
                          task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Run one ``accept_loop`` per listener; ``task_status.started(listeners)`` once they run."""
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(accept_loop, listener, handler, handler_nursery, open_connections)
        task_status.started(listeners)
