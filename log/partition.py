"""The log of one partition: an ordered list of segments in one directory.

Directory layout::

    <topic>-<partition>/
        00000000000000000000.log / .index / .timeindex    one segment per base offset
        00000000000000004096.log / ...                     the last one is the active segment
        leader-epoch-checkpoint                            see kwire.log.checkpoints
        log-start-offset-checkpoint                        written by DeleteRecords

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``.
The high watermark equals the log end offset until replication exists.

Everything here is synchronous and takes time as ``now_ms``.  ``append`` and
``read`` only write to / read from the page cache; ``flush``, ``maybe_flush``,
``close``, ``delete_records`` (checkpoint fsync) and ``open`` with recovery
block on the disk and belong in a worker thread.  ``flush`` may run in a
worker thread concurrently with ``append`` and ``read`` on the owner thread.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import threading
from typing import NamedTuple

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError

from . import checkpoints
from .config import LogConfig
from .producer_state import ProducerStateManager
from .segment import LogSegment

logger = logging.getLogger(__name__)

PRODUCER_STATE_SEGMENTS = 2     # newest segments replayed to rebuild producer state
INT32_MAX = 2**31 - 1


@dataclasses.dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int       # -1 with CreateTime
    log_start_offset: int
    duplicate: bool               # a retried idempotent batch: nothing was appended
    record_count: int
    needs_flush: bool             # flush.messages reached: run flush() in a worker thread


class PartitionLog:
    """Append, read, search and trim the log of one partition."""

    def __init__(self, path: str, config: LogConfig):
        self.path = path
        self.config = config
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self._epochs = checkpoints.LeaderEpochCache(path)
        self.leader_epoch = self._epochs.latest_epoch or 0
        self._producers = ProducerStateManager()
        self._lock = threading.Lock()         # counters shared with flush() in a worker thread
        self._unflushed_messages = 0
        self._unflushed_segments: list[LogSegment] = []
        self._last_flush_ms = 0

    def __repr__(self) -> str:
        return (f"PartitionLog({self.path!r}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset})")

    # -- opening ----------------------------------------------------------

    @classmethod
    def open(cls, path: str, config: LogConfig, *, now_ms: int, recover: bool) -> PartitionLog:
        """Open (creating the directory if missing).

        With ``recover`` (no clean-shutdown marker), the newest segments are
        checked batch by batch and cut at the first torn or corrupt batch;
        otherwise only index files and the headers after the active segment's
        last index entry are read.  Raises OSError on I/O failure.
        """
        os.makedirs(path, exist_ok=True)
        log = cls(path, config)
        log._last_flush_ms = now_ms
        bases = log._segment_bases()
        start = checkpoints.read_log_start_offset(path)
        if not bases:
            log.segments = [LogSegment.create(path, start or 0, now_ms=now_ms,
                                              index_interval=config.index_interval_bytes)]
        elif recover:
            log.segments = log._open_recovering(bases, now_ms)
        else:
            log.segments = log._open_clean(bases, now_ms)
        log.log_end_offset = log.high_watermark = log.segments[-1].next_offset
        first = log.segments[0].base_offset
        log.log_start_offset = min(max(start or first, first), log.log_end_offset)
        log._epochs.truncate_from_end(log.log_end_offset)
        log.leader_epoch = log._epochs.latest_epoch or 0
        log._rebuild_producer_state()
        return log

    def _segment_bases(self) -> list[int]:
        bases = []
        for name in os.listdir(self.path):
            stem, dot, ext = name.partition(".")
            if ext == "log" and len(stem) == 20 and stem.isdigit():
                bases.append(int(stem))
        return sorted(bases)

    def _open_segment(self, base: int, next_offset: int | None, now_ms: int) -> LogSegment:
        """Open trusting the indexes; if the headers it must read are damaged, recover it."""
        interval = self.config.index_interval_bytes
        try:
            return LogSegment.open_existing(self.path, base, next_offset=next_offset,
                                            now_ms=now_ms, index_interval=interval)
        except KafkaApiError as exc:
            logger.warning("%s: clean open failed (%s); recovering that segment", self.path, exc)
            segment = LogSegment(self.path, base, created_ms=now_ms, index_interval=interval)
            segment.recover(now_ms=now_ms)
            return segment

    def _open_clean(self, bases: list[int], now_ms: int) -> list[LogSegment]:
        closed = [self._open_segment(base, nxt, now_ms) for base, nxt in zip(bases, bases[1:])]
        return closed + [self._open_segment(bases[-1], None, now_ms)]

    def _open_recovering(self, bases: list[int], now_ms: int) -> list[LogSegment]:
        """Trust closed segments up to the last with sane indexes; check every batch after it."""
        interval = self.config.index_interval_bytes
        probe = [LogSegment(self.path, b, created_ms=now_ms, index_interval=interval) for b in bases]
        first_suspect = len(probe) - 1
        while first_suspect > 0 and not probe[first_suspect - 1].indexes_look_sane():
            first_suspect -= 1
        segments = [self._open_segment(base, nxt, now_ms)
                    for base, nxt in zip(bases[:first_suspect], bases[1:first_suspect + 1])]
        for i in range(first_suspect, len(probe)):
            segment = probe[i]
            cut = segment.recover(now_ms=now_ms)
            segments.append(segment)
            if cut:
                logger.warning("%s: cut %d bytes at position %d (kept in %s.corrupt-%d)",
                               segment.log_path, cut, segment.size, segment.log_path, now_ms)
            if i + 1 < len(probe) and segment.next_offset != probe[i + 1].base_offset:
                for later in probe[i + 1:]:       # unreachable past the cut: keep as evidence
                    os.replace(later.log_path, f"{later.log_path}.corrupt-{now_ms}")
                    later.delete()
                break
        return segments

    def _rebuild_producer_state(self) -> None:
        self._producers.clear()
        for segment in self.segments[-PRODUCER_STATE_SEGMENTS:]:
            try:
                for header in segment.iter_headers(0):
                    self._producers.replay(header)
            except KafkaApiError as exc:
                logger.warning("%s: producer state rebuild stopped: %s", self.path, exc)

    # -- appending --------------------------------------------------------

    def append(self, records_data: bytes, *, now_ms: int) -> AppendResult:
        """Validate, assign offsets and append the record batches of one Produce partition.

        Raises KafkaApiError: CORRUPT_MESSAGE, INVALID_RECORD, MESSAGE_TOO_LARGE,
        UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_COMPRESSION_TYPE (from
        ``validate_produce_records``), INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER (idempotence), KAFKA_STORAGE_ERROR (write
        failed; nothing was appended).  Never fsyncs.
        """
        headers = records.validate_produce_records(records_data, self.config.max_message_bytes)
        duplicate, pending = self._producers.check(headers, self.log_end_offset, f"{self.path}: ")
        if duplicate is not None:
            return AppendResult(duplicate.first_offset, duplicate.last_offset, -1,
                                self.log_start_offset, True,
                                duplicate.last_offset - duplicate.first_offset + 1, False)
        buf = bytearray(records_data)
        append_time = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        offset, count, max_timestamp = self.log_end_offset, 0, -1
        for header in headers:
            records.stamp(buf, header.position, offset, self.leader_epoch)
            header.base_offset, header.partition_leader_epoch = offset, self.leader_epoch
            if append_time >= 0:
                records.set_log_append_time(buf, header.position, header.size, now_ms)
                header.max_timestamp = now_ms
                header.attributes |= records.TIMESTAMP_TYPE_BIT
            offset += header.last_offset_delta + 1
            count += header.record_count
            max_timestamp = max(max_timestamp, header.max_timestamp)
        self._maybe_roll(len(buf), offset - 1, max_timestamp, now_ms).append(buf, headers)
        self._producers.commit(pending)
        base, self.log_end_offset = self.log_end_offset, offset
        self.high_watermark = offset
        with self._lock:
            self._unflushed_messages += count
            needs_flush = self._unflushed_messages >= self.config.flush_interval_messages
        return AppendResult(base, offset - 1, append_time, self.log_start_offset, False,
                            count, needs_flush)

    def _maybe_roll(self, size: int, last_offset: int, max_timestamp: int,
                    now_ms: int) -> LogSegment:
        """The segment to append to, rolling first if the active one is full or old (Kafka's rules)."""
        active = self.segments[-1]
        if active.size == 0:
            return active
        first_ts = active.first_batch_timestamp
        if first_ts is not None and first_ts >= 0:
            waited = max_timestamp - first_ts
        else:
            waited = now_ms - active.created_ms
        if (active.size + size > self.config.segment_bytes
                or active.size + size > INT32_MAX
                or waited > self.config.segment_ms
                or last_offset - active.base_offset > INT32_MAX):
            return self._roll(now_ms)
        return active

    def _roll(self, now_ms: int) -> LogSegment:
        old = self.segments[-1]
        old.seal()
        new = LogSegment.create(self.path, self.log_end_offset, now_ms=now_ms,
                                index_interval=self.config.index_interval_bytes)
        with self._lock:
            self._unflushed_segments.append(old)
            self.segments = self.segments + [new]
        return new

    # -- reading ----------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"{self.path}: offset {offset} outside [{self.log_start_offset}, "
                                f"{self.log_end_offset}]")

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
             max_offset: int | None = None) -> bytes:
        """Whole batches from the one containing ``offset``, up to ``max_bytes``.

        With ``min_one_batch`` the first batch is returned even if larger.
        Batches starting at or after ``max_offset`` (default: the high
        watermark) are left out.  b"" at the end.  Raises KafkaApiError:
        OFFSET_OUT_OF_RANGE outside [log_start_offset, log_end_offset],
        CORRUPT_MESSAGE (with file and position) for a damaged header.
        """
        return read_bytes(self.read_extents(offset, max_bytes, min_one_batch=min_one_batch,
                                            max_offset=max_offset))

    def read_extents(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
                     max_offset: int | None = None) -> list[tuple[LogSegment, int, int]]:
        """(segment, position, size) runs of whole batches that ``read`` would return."""
        self._check_offset(offset)
        limit = self.high_watermark if max_offset is None else max_offset
        if offset >= limit:
            return []
        segments = self.segments
        i = max(0, bisect_segments(segments, offset))
        header = segments[i].find_batch(offset)
        while header is None and i + 1 < len(segments):    # offset at a segment's end
            i += 1
            header = segments[i].find_batch(offset)
        if header is None:
            return []
        budget = max(max_bytes, header.size) if min_one_batch else max_bytes
        extents, position = [], header.position
        for segment in segments[i:]:
            taken, stopped = 0, False
            for h in segment.iter_headers(position):
                if h.base_offset >= limit or taken + h.size > budget:
                    stopped = True
                    break
                taken += h.size
            if taken:
                extents.append((segment, position, taken))
            budget -= taken
            if stopped or budget <= 0:
                break
            position = 0
        return extents

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after log_start_offset with
        timestamp >= ``timestamp_ms``, or None.  Raises KafkaApiError(CORRUPT_MESSAGE)."""
        for segment in self.segments:
            found = segment.find_timestamp(timestamp_ms, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp, or None."""
        live = [s for s in self.segments
                if s.next_offset > self.log_start_offset and s.max_timestamp >= 0]
        best = None
        for segment in sorted(live, key=lambda s: -s.max_timestamp):
            found = segment.max_timestamp_record(self.log_start_offset)
            if found is not None and (best is None or found[1] > best[1]):
                best = found
            if best is not None and best[1] >= segment.max_timestamp:
                break
        return best

    # -- durability -------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsync everything written so far; ``now_ms`` restarts the flush.ms clock.

        Blocking: run it in a worker thread (it may overlap ``append``/``read``).
        Raises OSError.
        """
        with self._lock:
            if now_ms is not None:
                self._last_flush_ms = now_ms
            pending = self._unflushed_segments + [self.segments[-1]]
            self._unflushed_segments = []
            self._unflushed_messages = 0
        for segment in pending:
            segment.flush()

    def flush_due(self, now_ms: int) -> bool:
        """True if flush.ms has elapsed since the last flush and something is unflushed.

        Non-blocking; pair with ``flush(now_ms)`` in a worker thread.
        """
        return (now_ms - self._last_flush_ms >= self.config.flush_interval_ms
                and (self._unflushed_messages > 0 or bool(self._unflushed_segments)))

    def maybe_flush(self, now_ms: int) -> bool:
        """``flush()`` if flush.ms has elapsed; returns whether it flushed.  Blocking."""
        if not self.flush_due(now_ms):
            return False
        self.flush(now_ms)
        return True

    def close(self) -> None:
        """Clean shutdown: record final max timestamps, fsync and close every file."""
        self.segments[-1].seal()
        self.flush()
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        """Close the files and remove the partition directory."""
        for segment in self.segments:
            segment.close()
        shutil.rmtree(self.path, ignore_errors=True)

    # -- leader epochs ----------------------------------------------------

    def set_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Become leader in ``epoch`` from ``start_offset``; older epochs are ignored. Raises OSError."""
        if self._epochs.assign(epoch, start_offset):
            self.leader_epoch = epoch

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (leader_epoch, end_offset), (-1, -1) if unknown."""
        if not self._epochs.entries and epoch == self.leader_epoch:
            return epoch, self.log_end_offset
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # -- trimming ---------------------------------------------------------

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move log_start_offset to ``before_offset`` (-1 = high watermark).

        Returns the new log_start_offset (the low watermark).  Whole segments
        below it are deleted.  Raises KafkaApiError(OFFSET_OUT_OF_RANGE) above
        the high watermark or for negative offsets other than -1; OSError.
        """
        if before_offset == -1:
            before_offset = self.high_watermark
        if before_offset < 0 or before_offset > self.high_watermark:
            raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"{self.path}: cannot delete records before {before_offset}, "
                                f"high watermark is {self.high_watermark}")
        if before_offset > self.log_start_offset:
            checkpoints.write_log_start_offset(self.path, before_offset)
            self.log_start_offset = before_offset
            self._delete_oldest(lambda s: s.next_offset <= self.log_start_offset)
        return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete closed segments past retention.ms (by largest timestamp) or beyond retention.bytes.

        Returns the number of segments deleted; moves log_start_offset.
        """
        deleted = 0
        if self.config.retention_ms >= 0:
            limit = self.config.retention_ms
            deleted += self._delete_oldest(lambda s: now_ms - s.largest_timestamp() > limit)
        if self.config.retention_bytes >= 0:
            excess = [self.size_bytes() - self.config.retention_bytes]

            def over(segment: LogSegment) -> bool:
                if excess[0] - segment.size < 0:
                    return False
                excess[0] -= segment.size
                return True
            deleted += self._delete_oldest(over)
        return deleted

    def _delete_oldest(self, predicate) -> int:
        """Delete closed segments from the oldest while ``predicate`` holds and they are
        below the high watermark; never the active segment."""
        doomed = []
        for segment in self.segments[:-1]:
            if segment.next_offset > self.high_watermark or not predicate(segment):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        with self._lock:
            self.segments = self.segments[len(doomed):]
            self._unflushed_segments = [s for s in self._unflushed_segments if s not in doomed]
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        for segment in doomed:
            segment.delete()
        return len(doomed)

    # -- introspection ----------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic settings; segment size applies from the next roll."""
        self.config = config
        for segment in self.segments:
            segment.index_interval = config.index_interval_bytes

    def size_bytes(self) -> int:
        return sum(segment.size for segment in self.segments)

    def producer_ids(self) -> int:
        """Largest producer id seen in this log (-1 if none)."""
        return self._producers.max_producer_id


class FileSlice(NamedTuple):
    """``size`` bytes at ``position`` of the open file ``fd`` (a duplicate the reader owns)."""
    fd: int
    position: int
    size: int

    def close(self) -> None:
        os.close(self.fd)


def read_bytes(extents: list[tuple[LogSegment, int, int]]) -> bytes:
    """The bytes of ``read_extents`` runs."""
    return b"".join(segment.read(position, size) for segment, position, size in extents)


def open_slices(extents: list[tuple[LogSegment, int, int]]) -> list[FileSlice]:
    """File slices for ``read_extents`` runs, each with its own duplicated descriptor
    (so retention may delete the segment while it is sent); close them after use."""
    return [FileSlice(os.dup(segment.fileno()), position, size) for segment, position, size in extents]


def bisect_segments(segments: list[LogSegment], offset: int) -> int:
    """Index of the last segment whose base offset is <= ``offset`` (-1 if none)."""
    lo, hi = 0, len(segments)
    while lo < hi:
        mid = (lo + hi) // 2
        if segments[mid].base_offset <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1
