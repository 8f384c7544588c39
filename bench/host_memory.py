"""Warm the guest's free memory before a timed run (benchmarks on a lazily backed VM).

On the 2-core VM these benchmarks run on, the host backs the guest's free memory
lazily and takes freed pages back a few seconds after they are freed (virtio-balloon
free page reporting).  The first touch of such a page costs about 12 us instead of
about 2 us.  Only about 1.2 GB of free memory stays backed, so a benchmark that
writes more than that to the page cache (or that a client buffers) meets the slow
faults part-way through, in whichever run crosses the line: measured with
``python bench/host_memory.py``, 256 MiB of new memory took 0.15 s to touch up to
about 1.1 GB in use and 0.78 s beyond it, and four 200 MB produce runs in a row
went from 780,000 to 300,000 records/s with a fresh client process each time.

``warm(mib)`` touches and frees ``mib`` MiB just before a timed run, so the pages the
run allocates next are backed ones.  It costs up to about 3 s per GiB, outside the
timed part, and changes nothing on a machine without this behaviour.
"""
from __future__ import annotations

import mmap
import sys
import time

PAGE = mmap.PAGESIZE


def _touch(area: mmap.mmap) -> None:
    """Write one byte per page of ``area``: the kernel backs every page of it."""
    for offset in range(0, len(area), PAGE):
        area[offset] = 1


def warm(mib: int) -> float:
    """Touch ``mib`` MiB of new anonymous memory, then free it; seconds taken."""
    started = time.perf_counter()
    if mib > 0:
        with mmap.mmap(-1, mib << 20) as area:
            _touch(area)
    return time.perf_counter() - started


def main() -> int:
    """Show the effect: touch 256 MiB blocks of new memory, kept, and time each."""
    kept = []
    for i in range(16):
        started = time.perf_counter()
        kept.append(mmap.mmap(-1, 256 << 20))
        _touch(kept[-1])
        print(f"{(i + 1) * 256:>5} MiB in use: the last 256 MiB took {time.perf_counter() - started:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
