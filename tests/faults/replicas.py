"""Replicas byte-identical up to the high watermark: each broker's segment files, compared.

A partition's log on disk is its ``.log`` segments, named by 20-digit base
offset, concatenated in name order; each holds whole v2 record batches::

    offset  size  field
         0     8  baseOffset         int64
         8     4  batchLength        int32   bytes after this field
        12     4  partitionLeaderEpoch
        16     1  magic              int8    2
        17     4  crc
        21     2  attributes
        23     4  lastOffsetDelta    int32
        ...       (61-byte header, then records)

Only the fields above are read, independently of the broker's own codec so a
bug there cannot hide here.  Followers store the leader's batches as fetched
(base offset and leader epoch included), so below the high watermark every
replica must hold the same bytes.  ``log_prefix`` is pure; ``compare_replicas``
reads the files.
"""
from __future__ import annotations

import glob
import os
import struct
import time
from typing import Mapping

__all__ = ["Batch", "batches", "compare_replicas", "describe_divergence", "log_prefix"]

_PREFIX = struct.Struct(">qi")        # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")
LAST_OFFSET_DELTA_AT = 23
HEADER_SIZE = 61
LOG_OVERHEAD = _PREFIX.size           # bytes a batch has beyond batchLength
assert LOG_OVERHEAD == 12


class Batch(tuple):
    """``(base_offset, last_offset, start, end)``: a batch and its byte range."""
    __slots__ = ()

    def __new__(cls, base_offset: int, last_offset: int, start: int, end: int):
        return super().__new__(cls, (base_offset, last_offset, start, end))


def batches(data: bytes) -> list[Batch]:
    """Every whole batch of ``data`` in order; stops at a torn or malformed tail."""
    out: list[Batch] = []
    position = 0
    while position + HEADER_SIZE <= len(data):
        base_offset, length = _PREFIX.unpack_from(data, position)
        end = position + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or end > len(data):
            break
        delta, = _LAST_OFFSET_DELTA.unpack_from(data, position + LAST_OFFSET_DELTA_AT)
        out.append(Batch(base_offset, base_offset + delta, position, end))
        position = end
    return out


def log_prefix(data: bytes, high_watermark: int) -> tuple[bytes, int]:
    """The bytes of the batches wholly below ``high_watermark`` and the offset after the last
    of them (what this replica holds of the committed log)."""
    end, next_offset = 0, 0
    for base_offset, last_offset, _start, batch_end in batches(data):
        if last_offset >= high_watermark:
            break
        end, next_offset = batch_end, last_offset + 1
    return data[:end], next_offset


def describe_divergence(prefixes: Mapping[int, bytes]) -> str:
    """Where replicas' prefixes first differ: the first batch whose bytes are not the same."""
    listed = {broker: batches(data) for broker, data in prefixes.items()}
    longest = max(len(b) for b in listed.values())
    for n in range(longest):
        seen = {}
        for broker, items in listed.items():
            if n < len(items):
                base, last, start, end = items[n]
                seen[broker] = (base, last, prefixes[broker][start:end])
            else:
                seen[broker] = None
        if len({v if v is None else v[2] for v in seen.values()}) > 1:
            shown = {b: ("missing" if v is None else f"offsets {v[0]}..{v[1]}, {len(v[2])} bytes")
                     for b, v in seen.items()}
            return f"batch #{n} differs: {shown}"
    return "same batches, different lengths"


def partition_bytes(log_dir: str, topic: str, partition: int) -> bytes:
    """The concatenated ``.log`` segments of ``topic-partition`` under ``log_dir``."""
    chunks = []
    for path in sorted(glob.glob(os.path.join(log_dir, f"{topic}-{partition}", "*.log"))):
        with open(path, "rb") as f:
            chunks.append(f.read())
    return b"".join(chunks)


def compare_replicas(log_dirs: Mapping[int, str], topic: str, high_watermarks: Mapping[int, int],
                     timeout: float = 10.0) -> list[str]:
    """Divergences of ``topic``'s replicas below each partition's high watermark, one line per
    partition; empty when every broker in ``log_dirs`` holds identical bytes.  A replica still
    short of the watermark is re-read for up to ``timeout`` seconds."""
    problems = []
    for partition, hw in sorted(high_watermarks.items()):
        deadline = time.monotonic() + timeout
        while True:
            held = {b: log_prefix(partition_bytes(d, topic, partition), hw) for b, d in log_dirs.items()}
            short = {b: nxt for b, (_, nxt) in held.items() if nxt < hw}
            same = len({data for data, _ in held.values()}) == 1
            if (same and not short) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if short:
            problems.append(f"{topic}-{partition}: high watermark {hw}, replicas hold only up to {short}")
        elif not same:
            problems.append(f"{topic}-{partition} below high watermark {hw}: "
                            f"{describe_divergence({b: d for b, (d, _) in held.items()})}")
    return problems
