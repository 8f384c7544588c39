"""Keep glibc's allocator from mapping and unmapping the broker's big, short-lived buffers.

A produce request's frame, a follower's fetch response and the record sets
decoded from it are hundreds of KB to a few MB each, and each lives for one
request.  glibc serves large blocks with ``mmap`` (above a threshold that
starts at 128 KiB) and hands a freed heap top back to the kernel once it
exceeds 128 KiB, so every such buffer touches fresh pages again: a page fault
per 4 KiB, plus zeroing.  Under RF=3 load on the 2-core VM the brokers spent
over a tenth of their CPU in those faults (``perf``: ``exc_page_fault`` under
``memset``/``memmove``).  Raising both thresholds lets freed buffers be reused
from the heap; the price is up to ``TRIM_THRESHOLD`` bytes of freed memory kept
resident after a burst.

Applied by ``kwire serve`` only, whose process is the broker's own; an
embedded broker leaves its host program's allocator alone.  A glibc tunable
set in the environment (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``GLIBC_TUNABLES``) wins, and on another C library this does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1              # <malloc.h>
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 256 * 1024 * 1024
_USER_SET = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def tune_for_broker() -> bool:
    """Raise glibc's mmap and trim thresholds; True when both were applied."""
    if any(name in os.environ for name in _USER_SET):
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    applied = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    logger.debug("allocator thresholds %s", "raised" if applied else "left as they were")
    return applied
