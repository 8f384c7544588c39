"""Sending response parts: file records go out with sendfile(2) and are released once sent
or abandoned (``close_deferred``)."""
from __future__ import annotations

import errno
import os

import trio


def close_deferred(value) -> None:
    """Release the file records (anything with ``close`` that is not bytes) inside a response's
    fields or parts; nothing else is touched."""
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, list):
        if hasattr(value, "close") and hasattr(value, "size"):
            value.close()
        return
    for item in value:
        if isinstance(item, (dict, list)) or (hasattr(item, "close") and hasattr(item, "size")):
            close_deferred(item)


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
