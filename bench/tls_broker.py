#!/usr/bin/env python
"""``kwire serve``, with the CPU time its TLS connections spend decrypting counted.

    python bench/tls_broker.py COUNTERS_FILE serve [kwire serve arguments...]

For ``bench/tls.py``: the same broker as ``python -m kwire serve``, except that
``kwire.security.tls_stream.TlsStream._decrypt_into`` (the loop of ``SSLObject.read`` calls that
turns received TLS records into plaintext, straight into the request's buffer) adds
the thread CPU time it took and the plaintext bytes it returned to two doubles in
``COUNTERS_FILE``, a 16-byte file mapped into memory (made here; read it with
``read_counters``).  The timer costs two ``time.thread_time()`` calls per call of
``_decrypt_into``, which decrypts every record already received (a few hundred calls
per 200 MB), not per record.
"""
from __future__ import annotations

import mmap
import os
import struct
import sys
import time
from pathlib import Path

COUNTERS = struct.Struct("<dd")     # decrypting CPU seconds, plaintext bytes


def read_counters(path: str | os.PathLike) -> tuple[float, float]:
    """(CPU seconds spent decrypting, plaintext bytes decrypted) so far."""
    with open(path, "rb") as f:
        return COUNTERS.unpack(f.read(COUNTERS.size))


def _count_decryption(path: str) -> None:
    from kwire.security import tls_stream

    with open(path, "wb") as f:
        f.write(bytes(COUNTERS.size))
    fd = os.open(path, os.O_RDWR)
    counters = mmap.mmap(fd, COUNTERS.size)
    os.close(fd)
    decrypt = tls_stream.TlsStream._decrypt_into
    clock = time.thread_time

    def _decrypt_into(self, view):
        started = clock()
        got = decrypt(self, view)
        seconds, count = COUNTERS.unpack_from(counters)
        COUNTERS.pack_into(counters, 0, seconds + clock() - started, count + (got or 0))
        return got

    tls_stream.TlsStream._decrypt_into = _decrypt_into


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    _count_decryption(argv[0])
    from kwire.cli import main as kwire_main
    return kwire_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
