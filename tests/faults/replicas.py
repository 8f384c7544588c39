"""Replicas byte-identical up to the high watermark: each broker's segment files, compared.

A partition's log on disk is its ``.log`` segments, named by 20-digit base
offset, concatenated in name order; each holds whole v2 record batches::

    offset  size  field
         0     8  baseOffset         int64
         8     4  batchLength        int32   bytes after this field
        12     4  partitionLeaderEpoch int32
        16     1  magic              int8    2
        17     4  crc                uint32
        21     2  attributes         int16   bit 4 transactional, bit 5 control
        23     4  lastOffsetDelta    int32
        27     8  baseTimestamp      int64
        35     8  maxTimestamp       int64
        43     8  producerId         int64   -1: no idempotence
        51     2  producerEpoch      int16
        53     4  baseSequence       int32   -1: none (a control batch, a plain producer)
        57     4  recordCount        int32
        61        records

Only the header is read, independently of the broker's own codec so a bug
there cannot hide here.  Followers store the leader's batches as fetched
(base offset and leader epoch included), so below the high watermark every
replica must hold the same bytes.  ``batches`` and ``log_prefix`` are pure;
``compare_replicas`` and ``replica_batches`` read the files.
"""
from __future__ import annotations

import glob
import os
import struct
import time
import typing
from typing import Mapping

__all__ = ["Batch", "batches", "compare_replicas", "describe_divergence", "log_prefix", "replica_batches"]

_PREFIX = struct.Struct(">qi")        # baseOffset, batchLength
# partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp,
# producerId, producerEpoch, baseSequence, recordCount
_HEADER = struct.Struct(">ibIhiqqqhii")
HEADER_SIZE = 61
LOG_OVERHEAD = _PREFIX.size           # bytes a batch has beyond batchLength
assert LOG_OVERHEAD == 12 and LOG_OVERHEAD + _HEADER.size == HEADER_SIZE
TRANSACTIONAL_BIT, CONTROL_BIT = 0x10, 0x20
INT32_MAX = 2 ** 31 - 1


class Batch(typing.NamedTuple):
    """A v2 batch's header fields and its byte range ``start:end`` in the data read."""
    base_offset: int
    last_offset: int
    start: int
    end: int
    leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    attributes: int = 0
    records: int = 0
    magic: int = 2

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def idempotent(self) -> bool:
        """A data batch that carries a producer id and sequences (idempotent or transactional)."""
        return self.magic == 2 and not self.control and self.producer_id >= 0 and self.base_sequence >= 0

    @property
    def last_sequence(self) -> int:
        """Kafka's lastSequence: baseSequence + lastOffsetDelta, wrapping past INT32_MAX to 0."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset - self.base_offset) % (INT32_MAX + 1)

    def sequence_at(self, offset: int) -> int:
        """The producer sequence of the record at ``offset`` (-1 when the batch has none)."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + offset - self.base_offset) % (INT32_MAX + 1)

    def describe(self) -> str:
        kind = "control" if self.control else "txn" if self.transactional else "data"
        seqs = f"seq {self.base_sequence}..{self.last_sequence}" if self.base_sequence >= 0 else "seq -"
        return (f"offsets {self.base_offset}..{self.last_offset} leaderEpoch {self.leader_epoch} "
                f"pid {self.producer_id} epoch {self.producer_epoch} {seqs} {kind} records {self.records}")


def batches(data: bytes) -> list[Batch]:
    """Every whole batch of ``data`` in order, with its header; stops at a torn or malformed tail."""
    out: list[Batch] = []
    position = 0
    while position + HEADER_SIZE <= len(data):
        base_offset, length = _PREFIX.unpack_from(data, position)
        end = position + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or end > len(data):
            break
        (leader_epoch, magic, _crc, attributes, delta, _base_ts, _max_ts, producer_id, producer_epoch,
         base_sequence, records) = _HEADER.unpack_from(data, position + LOG_OVERHEAD)
        out.append(Batch(base_offset, base_offset + delta, position, end, leader_epoch, producer_id,
                         producer_epoch, base_sequence, attributes, records, magic))
        position = end
    return out


def log_prefix(data: bytes, high_watermark: int) -> tuple[bytes, int]:
    """The bytes of the batches wholly below ``high_watermark`` and the offset after the last
    of them (what this replica holds of the committed log)."""
    end, next_offset = 0, 0
    for batch in batches(data):
        if batch.last_offset >= high_watermark:
            break
        end, next_offset = batch.end, batch.last_offset + 1
    return data[:end], next_offset


def describe_divergence(prefixes: Mapping[int, bytes]) -> str:
    """Where replicas' prefixes first differ: the first batch whose bytes are not the same."""
    listed = {broker: batches(data) for broker, data in prefixes.items()}
    longest = max(len(b) for b in listed.values())
    for n in range(longest):
        seen = {}
        for broker, items in listed.items():
            if n < len(items):
                b = items[n]
                seen[broker] = (b.base_offset, b.last_offset, prefixes[broker][b.start:b.end])
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


def replica_batches(log_dirs: Mapping[int, str], topic: str,
                    high_watermarks: Mapping[int, int]) -> dict[int, dict[int, list[Batch]]]:
    """{partition: {broker: its batches wholly below the partition's high watermark}}, read now
    from every broker's segment files (call it while the cluster still runs)."""
    out: dict[int, dict[int, list[Batch]]] = {}
    for partition, hw in sorted(high_watermarks.items()):
        out[partition] = {b: batches(log_prefix(partition_bytes(d, topic, partition), hw)[0])
                          for b, d in sorted(log_dirs.items())}
    return out
