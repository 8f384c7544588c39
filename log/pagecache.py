"""Page-cache hints for segment files: start write-back early, drop what lies far behind.

An append only copies bytes into the page cache; the kernel writes them out
later and must reclaim cached pages before it can cache new ones.  When the
cache is full of dirty pages, that reclaim happens inside the writer's own
``write`` calls.  On the 2-core Firecracker VM this project is measured on, a
log appended to plainly cost 0.8-2.7 ms of kernel CPU per MB once about 1 GB
had been written; starting write-back of every few MB as soon as they are
appended (``sync_file_range(SYNC_FILE_RANGE_WRITE)``: nothing waits) and
dropping pages far behind the end (``POSIX_FADV_DONTNEED``) cost 0.25 ms/MB
(scripted in ``bench/page_cache.py``).  Neither is a flush: durability stays
with ``flush.messages`` / ``flush.ms``.

Both calls are hints: when one is unavailable or fails, the append has
happened anyway and the kernel's own write-back applies.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

logger = logging.getLogger(__name__)

SYNC_FILE_RANGE_WRITE = 2        # <fcntl.h>: start write-out of dirty pages, do not wait


def _load_sync_file_range():
    if not hasattr(os, "posix_fadvise"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        function = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load_sync_file_range()
AVAILABLE = _sync_file_range is not None


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Ask the kernel to start writing ``length`` bytes at ``offset`` of ``fd`` out; False if it cannot."""
    if _sync_file_range is None or length <= 0:
        return False
    return _sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE) == 0


def drop(fd: int, offset: int, length: int) -> None:
    """Let the kernel forget the cached pages of that range (pages still dirty or under
    write-back stay; readers of the range then read from the disk)."""
    if length > 0:
        try:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        except OSError as exc:         # advisory: the data is in the file either way
            logger.debug("posix_fadvise(DONTNEED) failed: %s", exc)


class WriteBehind:
    """Per-file marks: bytes handed to write-back (``started``) and dropped (``dropped``).

    ``after_append(fd, size, interval, keep)`` runs after each append: once
    ``interval`` bytes have accumulated since the last write-back, the kernel
    is asked to start writing them, and pages more than ``keep`` bytes behind
    the end of the file whose write-back was started are dropped.  ``interval``
    0 disables both; ``keep`` -1 keeps every page cached (Kafka's behaviour).
    """

    __slots__ = ("started", "dropped")

    def __init__(self, size: int = 0):
        self.started = size          # an opened file's old bytes are left to the kernel
        self.dropped = size

    def after_append(self, fd: int, size: int, interval: int, keep: int) -> None:
        if interval <= 0 or size - self.started < interval:
            return
        if not start_writeback(fd, self.started, size - self.started):
            return
        self.started = size
        if keep >= 0 and size - keep > self.dropped:
            # only what was handed to write-back at least one interval ago is likely clean
            end = min(size - keep, size - interval)
            if end > self.dropped:
                drop(fd, self.dropped, end - self.dropped)
                self.dropped = end

    def truncated(self, size: int) -> None:
        """The file was cut back to ``size``."""
        self.started = min(self.started, size)
        self.dropped = min(self.dropped, size)
