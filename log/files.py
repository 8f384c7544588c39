"""File operations the log's stores share: writes that survive short writes, whole small files
(the producer-state snapshot), fsync by name and unlinking what may already be gone.

Nothing here knows a format; every function raises OSError unless it says otherwise.
"""
from __future__ import annotations

import os

IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024)   # buffers per writev


def writev_all(fd: int, buf) -> int:
    """Write ``buf`` (bytes-like, or a list of them written back to back) whole at the
    descriptor's position, with as few ``writev`` calls as IOV_MAX allows, resuming after
    short writes; returns the byte count.  Raises OSError (part of it may be in the file)."""
    if not isinstance(buf, list):
        buf = [buf]
    views = [memoryview(b) for b in buf if len(b)]
    total = sum(v.nbytes for v in views)
    i = 0
    while i < len(views):
        written = os.writev(fd, views[i:i + IOV_MAX])
        while written:
            if written >= views[i].nbytes:
                written -= views[i].nbytes
                i += 1
            else:
                views[i] = views[i][written:]
                written = 0
    return total


def write_all(fd: int, data) -> None:
    """Write ``data`` whole, resuming after short writes.  Raises OSError."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(path: str, data, *, sync: bool = False) -> None:
    """Create or replace the file at ``path`` holding exactly ``data``, fsynced with ``sync``.
    Raises OSError, after removing what was written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        unlink_quietly(path)
        raise


def read_file(path: str) -> bytes | None:
    """The bytes of the file at ``path``, None if there is no file.  Raises OSError."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def fsync_file(path: str) -> None:
    """fsync a file by name (one missing meanwhile is fine).  Raises OSError."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    """Remove ``path``; one already gone is fine.  Raises OSError for any other failure."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
