"""Kafka's log cleaner for one partition: compaction of ``cleanup.policy=compact`` logs.

A clean keeps the latest record of every key, at its original offset, and
drops the older ones (offsets are never renumbered, so gaps appear).  It runs
in four steps; only the first and third touch the live log, both on the
owner (Trio) thread, with no I/O but renames and unlinks:

1. ``plan`` (owner thread): the cleanable range.  The first dirty offset
   comes from ``cleaner-offset-checkpoint`` (kwire.log.checkpoints); the
   first uncleanable offset is the lowest of the active segment's base (the
   active segment is never cleaned), the high watermark, the last stable
   offset (open transactions are never cleaned) and the base of the first
   segment newer than ``min.compaction.lag.ms``.  The dirty ratio is
   dirty bytes / bytes below the uncleanable offset; ``due`` says whether it
   passes ``min.cleanable.dirty.ratio`` or the oldest dirty record is older
   than ``max.compaction.lag.ms``.
2. ``clean`` (worker thread): build the offset map (key -> latest offset)
   over the dirty range, at most ``max_entries`` keys (``log.cleaner.dedupe.
   buffer.size`` bounds its memory; a full map ends this pass where it
   filled, the rest is cleaned by the next pass).  Then every segment below
   the map's end is rewritten, small neighbours grouped into one (their total
   size within ``segment.bytes``), as ``<base>.log.cleaned`` and its indexes;
   fsynced; ``<base>.swapend`` (the end offset of the replaced segments) is
   written; the files are renamed ``.cleaned`` -> ``.swap``; the directory is
   fsynced.
3. ``PartitionLog.replace_segments`` (owner thread): the old segments' files
   are unlinked (open descriptors keep in-flight reads valid), the ``.swap``
   files renamed live (the ``.log`` last) and the segment list replaced in
   one step, so a fetch never sees half a swap.
4. ``finish`` (worker thread): fsync the directory, write the checkpoint.

A kill -9 at any point leaves a readable log with nothing lost that should
have been kept (``complete_swaps`` at open, below): ``.cleaned`` files are
incomplete and deleted; a ``.log.swap`` means the cleaned copy is complete,
so the swap is finished (old segments in [base, swapend) removed, ``.swap``
renamed live); a stray ``.swapend`` is removed.

What a record's fate is, in a segment being cleaned (Kafka's rules):

* a record whose key has a later offset in the map is dropped; a record
  without a key is dropped (a compacted topic refuses them at produce);
* a tombstone (null value) is dropped once its segment's largest timestamp
  is older than ``delete.retention.ms``;
* a batch of an aborted transaction is dropped whole; an ABORT marker is
  kept while batches of its transaction were seen in this pass and dropped,
  once past the delete horizon, in the next; a COMMIT marker is dropped past
  the horizon when no batch of its transaction remains;
* a producer's last batch (per the producer state) is kept, emptied if none
  of its records survive, so idempotent producers' sequences survive a
  restart (Kafka does the same);
* a batch that loses some records is rebuilt (kwire.codecs.records.
  rebuild_batch), one that loses none is copied byte for byte.

Cleaned segments have no ``.txnsnapshot``: a marker may have been dropped
with its transaction, so a snapshot taken before could name a transaction
as open forever; producer state is rebuilt from the log instead.
Their transaction index holds the old segments' entries.

Fault injection for tests: with ``KWIRE_CLEANER_PAUSE_AT`` set to
``cleaned``, ``swap`` or ``replaced``, the cleaner creates
``<log dir>/cleaner-paused-<phase>`` at that point and blocks for good (a test
then kills the broker with -9).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any

from kwire.codecs import records
from kwire.codecs.records import BatchHeader

from . import checkpoints, recovery
from .files import unlink_quietly as _unlink
from .segment import LogSegment, segment_name

# a kwire.log.partition.PartitionLog (not imported: the partition imports this module)
PartitionLog = Any

logger = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1
# Memory one offset-map entry costs in CPython (int key from hash(), int offset, dict slot
# and its share of the table, which doubles as it grows): 159-185 bytes measured with maps of
# 100k-750k keys (bench/cleaner.py), so 192 keeps a full map inside the buffer it is given;
# log.cleaner.dedupe.buffer.size x log.cleaner.io.buffer.load.factor / this = keys.
MAP_ENTRY_BYTES = 192
WRITE_CHUNK = 512 * 1024
PAUSE_ENV = "KWIRE_CLEANER_PAUSE_AT"
SWAP_END = ".swapend"


class CleanAborted(Exception):
    """The clean was stopped (shutdown, the log deleted or changed under it)."""


# -- step 1: what to clean ---------------------------------------------------------------

@dataclasses.dataclass
class CleanPlan:
    log: PartitionLog
    segments: list[LogSegment]     # from the log's first segment up to the uncleanable offset
    first_dirty: int
    first_uncleanable: int
    dirty_bytes: int
    total_bytes: int
    overdue: bool                  # the oldest dirty record is older than max.compaction.lag.ms
    last_batches: dict[int, int]   # producer id -> last offset of its last batch
    truncations: int
    now_ms: int

    @property
    def ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def due(self) -> bool:
        return self.dirty_bytes > 0 and (self.overdue or self.ratio >= self.log.config.min_cleanable_dirty_ratio)


def plan(log: PartitionLog, checkpoint: int | None, now_ms: int) -> CleanPlan | None:
    """The cleanable range of ``log`` (see the module docstring), or None if there is none.
    No I/O but a stat for a segment without timestamps; owner thread."""
    if log.offline or not log.config.compacted:
        return None
    segments = log.segments
    if len(segments) < 2:
        return None
    config = log.config
    bound = min(segments[-1].base_offset, log.high_watermark, log.last_stable_offset)
    first_dirty = checkpoint if checkpoint is not None else 0
    if not log.log_start_offset <= first_dirty <= log.log_end_offset:
        first_dirty = log.log_start_offset
    first_dirty = max(first_dirty, segments[0].base_offset)
    if config.min_compaction_lag_ms > 0:
        for segment in segments[:-1]:
            if segment.next_offset > first_dirty and \
                    segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms:
                bound = min(bound, segment.base_offset)
                break
    chosen = [s for s in segments[:-1] if s.base_offset < bound]
    if not chosen or first_dirty >= bound:
        return None
    dirty = [s for s in chosen if s.next_offset > first_dirty]
    dirty_bytes = sum(s.size for s in dirty)
    total = sum(s.size for s in chosen)
    overdue = False
    if dirty and config.max_compaction_lag_ms < 2**63 - 1:
        first_ts = dirty[0].first_batch_timestamp
        if first_ts is None or first_ts < 0:
            first_ts = dirty[0].created_ms
        overdue = now_ms - first_ts > config.max_compaction_lag_ms
    result = CleanPlan(log, chosen, first_dirty, bound, dirty_bytes, total, overdue, {},
                       log.truncations, now_ms)
    if result.due:                      # only a clean needs them: skip the work otherwise
        result.last_batches = {pid: entry.batches[-1].last_offset
                               for pid, entry in log.producer_entries() if entry.batches}
    return result


# -- step 2: the clean --------------------------------------------------------------------

class Throttler:
    """log.cleaner.io.max.bytes.per.second, shared by every cleaner thread."""

    def __init__(self, bytes_per_second: float):
        self.rate = bytes_per_second
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._done = 0.0

    def set_rate(self, bytes_per_second: float) -> None:
        """A new rate, from the next call on (the window restarts)."""
        with self._lock:
            self.rate = bytes_per_second
            self._start, self._done = time.monotonic(), 0.0

    def __call__(self, n: int) -> None:
        if self.rate >= 1e300:
            return
        with self._lock:
            self._done += n
            due = self._start + self._done / self.rate
            now = time.monotonic()
            if now - self._start > 1.0 and due < now:      # idle for a while: restart the window
                self._start, self._done = now, 0.0
                return
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)


@dataclasses.dataclass
class CleanerLimits:
    max_entries: int                       # offset map capacity
    throttle: Throttler
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    pause_at: str | None = dataclasses.field(default_factory=lambda: os.environ.get(PAUSE_ENV) or None)


@dataclasses.dataclass
class CleanResult:
    plan: CleanPlan
    groups: list[tuple[list[LogSegment], LogSegment]]
    end_offset: int              # the next first dirty offset
    map_entries: int
    read_bytes: int
    written_bytes: int
    seconds: float
    dirty_bytes: int = 0         # of dirty batches this pass mapped (a full map stops early)

    def summary(self) -> str:
        dirty = self.dirty_bytes
        rate = dirty / self.seconds / 1e6 if self.seconds > 0 else 0.0
        return (f"{self.read_bytes} bytes read, {self.written_bytes} bytes written in "
                f"{self.seconds:.3f} s ({rate:.1f} MB/s of dirty log), {self.map_entries} keys in "
                f"the offset map ({self.map_entries * MAP_ENTRY_BYTES} bytes), "
                f"{sum(len(old) for old, _ in self.groups)} segment(s) into {len(self.groups)}")


def pause_point(limits: CleanerLimits, log_dir: str, phase: str) -> None:
    """Fault injection (see the module docstring): block for good at ``phase`` if asked."""
    if limits.pause_at == phase:
        with open(os.path.join(os.path.dirname(log_dir), f"cleaner-paused-{phase}"), "w"):
            pass
        logger.warning("%s: cleaner paused at %s (%s)", log_dir, phase, PAUSE_ENV)
        while True:
            time.sleep(3600)


class _Aborted:
    """Aborted transactions by producer: (first offset, marker offset) ranges."""

    def __init__(self, segments: list[LogSegment]):
        self.ranges: dict[int, list[tuple[int, int]]] = {}
        for segment in segments:
            for txn in segment.txn_index.entries():
                self.ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def contains(self, header: BatchHeader) -> bool:
        return any(first <= header.base_offset <= last
                   for first, last in self.ranges.get(header.producer_id, ()))


def _batches(segment: LogSegment, limits: CleanerLimits, counter: list[int]):
    """(header, batch bytes) of every batch of ``segment``, read in large chunks through a
    descriptor of its own (retention may close and delete the segment meanwhile: then
    CleanAborted)."""
    try:
        fd = os.open(segment.log_path, os.O_RDONLY)
    except FileNotFoundError:
        raise CleanAborted(f"{segment.log_path} was deleted") from None
    try:
        yield from _batches_from(fd, segment, limits, counter)
    finally:
        os.close(fd)


def _batches_from(fd: int, segment: LogSegment, limits: CleanerLimits, counter: list[int]):
    position, size = 0, segment.size
    while position < size:
        if limits.stop.is_set():
            raise CleanAborted("stopped")
        chunk = os.pread(fd, min(WRITE_CHUNK, size - position), position)
        at = 0
        while at < len(chunk):
            if len(chunk) - at < records.HEADER_SIZE:
                break
            header = records.read_header(chunk, at, whole=False)
            if at + header.size > len(chunk):
                if at == 0:                        # a batch larger than the chunk
                    chunk = os.pread(fd, header.size, position)
                    header = records.read_header(chunk, 0)
                    at = 0
                else:
                    break
            data = chunk[at:at + header.size]
            header.position = 0
            if not records.crc_ok(data, header):
                raise segment.corruption(position + at, f"CRC mismatch in batch at offset {header.base_offset}")
            yield header, data
            at += header.size
        if at == 0:
            raise segment.corruption(position, "batch cut short")
        counter[0] += at
        limits.throttle(at)
        position += at


def build_offset_map(plan: CleanPlan, limits: CleanerLimits, aborted: _Aborted,
                     counter: list[int]) -> tuple[dict[int, int], int, int]:
    """key hash -> latest offset over [first_dirty, first_uncleanable), at most
    ``limits.max_entries`` keys; returns (map, end offset of the mapped range, bytes of the
    dirty batches it covered)."""
    offsets: dict[int, int] = {}
    capacity = max(1, limits.max_entries)
    covered = 0
    for segment in plan.segments:
        if segment.next_offset <= plan.first_dirty:
            continue
        for header, data in _batches(segment, limits, counter):
            if header.last_offset < plan.first_dirty:
                continue
            if header.base_offset >= plan.first_uncleanable:
                return offsets, plan.first_uncleanable, covered
            if header.is_control or (header.is_transactional and aborted.contains(header)):
                covered += header.size
                continue
            _body, spans = records.batch_records(data, header)
            for span in spans:
                offset = header.base_offset + span.offset_delta
                if span.key is None or offset < plan.first_dirty or offset >= plan.first_uncleanable:
                    continue
                key = hash(span.key)
                if key not in offsets and len(offsets) >= capacity:
                    return offsets, offset, covered
                offsets[key] = offset
            covered += header.size
    return offsets, plan.first_uncleanable, covered


def group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Runs of neighbouring segments whose sizes add up to at most ``max_bytes`` (and whose
    offsets fit a segment's 32-bit relative offsets), as Kafka's groupSegmentsBySize."""
    groups, current, size = [], [], 0
    for segment in segments:
        if current and (size + segment.size > min(max_bytes, INT32_MAX)
                        or segment.next_offset - 1 - current[0].base_offset > INT32_MAX):
            groups.append(current)
            current, size = [], 0
        current.append(segment)
        size += segment.size
    if current:
        groups.append(current)
    return groups


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: which markers may go."""

    def __init__(self):
        self.seen: dict[int, bool] = {}          # producer id -> a batch of its txn was read

    def on_data(self, header: BatchHeader) -> None:
        if header.is_transactional:
            self.seen[header.producer_id] = True

    def marker_can_go(self, header: BatchHeader) -> bool:
        return not self.seen.pop(header.producer_id, False)


def _clean_batch(header: BatchHeader, data: bytes, offsets: dict[int, int], plan: CleanPlan,
                 aborted: _Aborted, txns: _TxnTracker, past_horizon: bool, end: int) -> bytes | None:
    """The batch as it goes into the cleaned segment, or None if it goes entirely.  A batch
    starting at or after ``end`` (the offset map's end: at most the high watermark and the
    last stable offset) is copied as it is: what lies above may still change (a truncation,
    an open transaction) and the map says nothing about it; in a batch the map's end cuts
    (a full map), the records from ``end`` on are kept as they are (Kafka's rule per record)."""
    if header.base_offset >= end:
        return data
    last_of_producer = header.producer_id >= 0 and \
        plan.last_batches.get(header.producer_id) == header.last_offset
    if header.is_control:
        if not header.record_count:               # emptied earlier: nothing to keep
            return data if last_of_producer else None
        can_go = txns.marker_can_go(header)
        return None if (can_go and past_horizon and not last_of_producer) else data
    txns.on_data(header)
    if header.is_transactional and aborted.contains(header):
        kept = []
        body = b""
    else:
        body, spans = records.batch_records(data, header)
        kept = []
        for span in spans:
            if header.base_offset + span.offset_delta >= end:
                kept.append(span)
                continue
            if span.key is None:
                continue
            latest = offsets.get(hash(span.key))
            if latest is not None and header.base_offset + span.offset_delta < latest:
                continue
            if span.null_value and past_horizon:
                continue
            kept.append(span)
        if len(kept) == len(spans):
            return data
    if not kept and not last_of_producer:
        return None
    return records.rebuild_batch(data, header, body, kept)


def _write_group(plan: CleanPlan, group: list[LogSegment], end: int, offsets: dict[int, int],
                 map_end: int, aborted: _Aborted, txns: _TxnTracker, limits: CleanerLimits,
                 counter: list[int]) -> LogSegment:
    """Write the cleaned copy of ``group`` (whose offsets end at ``end``) as ``.cleaned`` files,
    fsynced."""
    directory = os.path.dirname(group[0].log_path)
    config = plan.log.config
    cleaned = LogSegment.create(directory, group[0].base_offset, now_ms=plan.now_ms,
                                index_interval=config.index_interval_bytes, suffix=".cleaned")
    cleaned.created_ms = group[-1].created_ms
    horizon = plan.now_ms - config.delete_retention_ms
    out, headers, pending = [], [], 0

    def spill():
        nonlocal out, headers, pending
        if out:
            cleaned.append(out, headers)
            counter[1] += pending
            limits.throttle(pending)
        out, headers, pending = [], [], 0

    txn_entries = []
    for segment in group:
        past_horizon = segment.largest_timestamp() < horizon
        txn_entries.extend(segment.txn_index.entries())
        for header, data in _batches(segment, limits, counter):
            kept = _clean_batch(header, data, offsets, plan, aborted, txns, past_horizon, map_end)
            if kept is None:
                continue
            h = records.read_header(kept) if kept is not data else header
            h.position = pending
            out.append(kept)
            headers.append(h)
            pending += len(kept)
            if pending >= WRITE_CHUNK:
                spill()
    spill()
    cleaned.seal()
    cleaned.next_offset = end
    if txn_entries:
        cleaned.txn_index.reset(txn_entries)
    cleaned.flush()
    cleaned.txn_index.flush()
    mtime = os.stat(group[-1].log_path).st_mtime
    os.utime(cleaned.log_path, (mtime, mtime))
    return cleaned


def clean(plan: CleanPlan, limits: CleanerLimits) -> CleanResult:
    """Step 2 (module docstring): the cleaned copies, renamed ``.swap`` and durable.
    Worker thread.  Raises CleanAborted, OSError, KafkaApiError (damaged input: nothing is
    swapped; the ``.cleaned`` files are removed)."""
    started = time.monotonic()
    counter = [0, 0]                                   # bytes read, bytes written
    log_dir = plan.log.path
    made: list[LogSegment] = []
    try:
        aborted = _Aborted(plan.log.segments)
        offsets, end, covered = build_offset_map(plan, limits, aborted, counter)
        todo = [s for s in plan.segments if s.base_offset < end]
        groups = group_segments(todo, plan.log.config.segment_bytes)
        txns = _TxnTracker()
        pairs = []
        for i, group in enumerate(groups):
            group_end = groups[i + 1][0].base_offset if i + 1 < len(groups) else _segment_end(plan, group[-1])
            cleaned = _write_group(plan, group, group_end, offsets, end, aborted, txns, limits, counter)
            made.append(cleaned)
            pairs.append((group, cleaned))
        pause_point(limits, log_dir, "cleaned")
        for group, cleaned in pairs:
            checkpoints.write_atomically(_swap_end_path(cleaned), f"{_segment_end(plan, group[-1])}\n")
            cleaned.rename(".swap")
        checkpoints.fsync_directory(log_dir)
        pause_point(limits, log_dir, "swap")
    except BaseException:
        for segment in made:
            if segment.suffix == ".cleaned":
                segment.delete()
        raise
    return CleanResult(plan, pairs, end, len(offsets), counter[0], counter[1],
                       time.monotonic() - started, covered)


def _segment_end(plan: CleanPlan, segment: LogSegment) -> int:
    """The offset after ``segment`` in the log: the next segment's base."""
    segments = plan.log.segments
    for i, s in enumerate(segments):
        if s is segment:
            return segments[i + 1].base_offset if i + 1 < len(segments) else s.next_offset
    return segment.next_offset


def _swap_end_path(segment: LogSegment) -> str:
    return os.path.join(os.path.dirname(segment.log_path), segment_name(segment.base_offset) + SWAP_END)


def swap_done(segment: LogSegment) -> None:
    """The cleaned ``segment`` is live: its ``.swapend`` goes.  Raises OSError."""
    _unlink(_swap_end_path(segment))


def discard(result: CleanResult) -> None:
    """A clean that could not be swapped in: remove its ``.swap`` files (worker thread)."""
    for _old, cleaned in result.groups:
        cleaned.delete()
        _unlink(_swap_end_path(cleaned))


def finish(result: CleanResult) -> None:
    """Step 4: make the swap durable and checkpoint the next first dirty offset.  Raises OSError."""
    checkpoints.fsync_directory(result.plan.log.path)
    checkpoints.write_cleaner_offset(result.plan.log.path, result.end_offset)


# -- crash recovery ------------------------------------------------------------------------

_LIVE = (".log", ".index", ".timeindex", ".txnindex", ".txnsnapshot")


def complete_swaps(path: str) -> None:
    """At open, before the segments are listed: finish or undo a clean a crash interrupted
    (module docstring).  Idempotent.  Raises OSError."""
    names = os.listdir(path)
    for name in names:
        if name.endswith(".cleaned") or name.endswith(".deleted"):
            _unlink(os.path.join(path, name))
    swaps = sorted(int(n[:20]) for n in names if n.endswith(".log.swap") and n[:20].isdigit())
    for base in swaps:
        stem = os.path.join(path, segment_name(base))
        end = _read_swap_end(stem + SWAP_END)
        if end is None:
            end = _next_offset_of(stem + ".log.swap", base)
        logger.warning("%s: completing the log cleaner's swap of offsets [%d, %d) after a crash",
                       path, base, end)
        for other in recovery.segment_bases(path):
            if base < other < end:
                for ext in _LIVE:
                    _unlink(os.path.join(path, segment_name(other) + ext))
        _unlink(stem + ".txnsnapshot")
        for ext in (".index", ".timeindex", ".txnindex", ".log"):
            if os.path.exists(stem + ext + ".swap"):
                os.replace(stem + ext + ".swap", stem + ext)
            elif ext == ".txnindex":
                _unlink(stem + ext)
        _unlink(stem + SWAP_END)
    for name in names:
        if name.endswith(SWAP_END) and int(name[:20]) not in swaps:
            _unlink(os.path.join(path, name))
    if swaps:
        checkpoints.fsync_directory(path)


def _read_swap_end(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _next_offset_of(log_path: str, base: int) -> int:
    """The offset after the last whole batch of a ``.log.swap`` file (Kafka's rule when the
    replaced range is not recorded)."""
    end = base
    with open(log_path, "rb") as f:
        data = f.read()
    for header in records.scan_valid_prefix(data)[0]:
        end = header.next_offset
    return end
