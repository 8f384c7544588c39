"""One log segment: a ``.log`` file of whole v2 batches, its two sparse indexes, its
aborted-transaction index and the snapshot of the producer state at its start.

Files, named by the segment's base offset in 20 digits::

    00000000000000000000.log         batches exactly as received (base offsets stamped)
    00000000000000000000.index       see kwire.log.index
    00000000000000000000.timeindex
    00000000000000000000.txnindex    see kwire.log.txn_index (only once a transaction aborts)
    00000000000000000000.txnsnapshot see kwire.log.producer_state (written at roll)
    00000000000000000000.log.corrupt-<ms>   bytes cut off by recovery, kept as evidence

The ``.log`` file is written with ``os.write`` on an ``O_APPEND`` descriptor
and read with ``os.pread``; nothing here fsyncs except ``flush``.  A segment
knows its size, the offset after its last batch (``next_offset``) and its
largest timestamp; on a clean open these come from the index files and, for
the active segment only, from the batch headers after the last index entry.

Failures.  An append is all-or-nothing: if writing the ``.log`` or either
index fails (ENOSPC, EIO), the files are cut back to their previous sizes and
the in-memory state restored before KafkaApiError(KAFKA_STORAGE_ERROR) is
raised, so the segment still describes its files and no offset is reused.  If
the cut itself fails the segment no longer matches its files: ``UndoFailed``
is raised and the partition must go offline.  Damage found in stored bytes
(an inconsistent header, a CRC mismatch) is ``CorruptSegment``, also
KAFKA_STORAGE_ERROR (never CORRUPT_MESSAGE, which blames the client's own
record) and also a reason to take the partition offline.  Every position in
a message is a position in the ``.log`` file.

A replica's truncation (``truncate_to``) cuts the three files at a batch
boundary; the partition (kwire.log.replica) fsyncs them.  The transaction index
loses the entries of the markers cut.
"""
from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import re
import threading
from typing import Iterator

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import BatchHeader

from .files import fsync_file, read_file, unlink_quietly, write_file, writev_all
from .index import IndexCorrupt, OffsetIndex, TimeIndex
from .pagecache import WriteBehind
from .txn_index import AbortedTxn, TransactionIndex, TxnIndexCorrupt

logger = logging.getLogger(__name__)

HEADER_CHUNK = 16 * 1024         # pread size when walking headers only
RECOVERY_CHUNK = 4 * 1024 * 1024  # pread size when checking CRCs
NO_TIMESTAMP = -1
# Codec messages name positions inside the buffer they were given; ours name
# the file position instead, so the buffer-relative ones are dropped.
_BUFFER_POSITION = re.compile(r",? *(?:at )?position -?\d+")


class CorruptSegment(KafkaApiError):
    """Stored bytes fail a check (header, CRC, offset order); message names file and position."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class UndoFailed(KafkaApiError):
    """A failed append could not be cut back off the files: the partition must go offline."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


@dataclasses.dataclass(slots=True)
class _State:
    """What an append changes in memory, saved to restore it if the append fails."""
    size: int
    next_offset: int
    max_timestamp: int
    max_timestamp_offset: int
    first_batch_timestamp: int | None
    bytes_since_index: int


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    """A segment file and its indexes.  Not thread-safe except ``flush`` vs. the rest."""

    def __init__(self, directory: str, base_offset: int, *, created_ms: int,
                 index_interval: int = 4096, suffix: str = ""):
        self.base_offset = base_offset
        self.suffix = suffix          # "" live; ".cleaned" / ".swap" while the cleaner swaps it in
        self._set_paths(directory, suffix)
        self._snapshot_unsynced = False
        # set by recovery (and a damaged .txnindex): the partition's producer-state rebuild
        # must rewrite the transaction index from the batches
        self.rebuild_txn_index = False
        self.created_ms = created_ms
        self.index_interval = index_interval      # index.interval.bytes, updated live
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.max_timestamp_offset = base_offset   # last offset of the batch that reached it
        self.first_batch_timestamp: int | None = None
        self._bytes_since_index = 0
        self._index_counts: tuple[int, int] | None = None   # entries before this append's first
        self._fd: int | None = None
        self._lock = threading.Lock()             # flush (worker thread) vs. close/delete
        self._write_behind = WriteBehind()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r}, size={self.size}, next_offset={self.next_offset})"

    def _set_paths(self, directory: str, suffix: str) -> None:
        stem = os.path.join(directory, segment_name(self.base_offset))
        if not hasattr(self, "offset_index"):
            self.offset_index = OffsetIndex(stem + ".index" + suffix)
            self.time_index = TimeIndex(stem + ".timeindex" + suffix)
            self.txn_index = TransactionIndex(stem + ".txnindex" + suffix)
        self.log_path = stem + ".log" + suffix
        self.offset_index.path = stem + ".index" + suffix
        self.time_index.path = stem + ".timeindex" + suffix
        self.txn_index.path = stem + ".txnindex" + suffix
        self.snapshot_path = stem + ".txnsnapshot" + suffix
        self.suffix = suffix

    def rename(self, suffix: str) -> None:
        """Rename the segment's ``.log`` and index files to carry ``suffix`` instead of the
        current one (the ``.log`` last, so a ``.log`` with the new suffix means every index
        has it too), keeping the open descriptors.  A stale snapshot file under the new name
        is removed.  Not durable until the directory is fsynced.  Raises OSError."""
        directory = os.path.dirname(self.log_path)
        stem = os.path.join(directory, segment_name(self.base_offset))
        names = [(self.offset_index.path, stem + ".index" + suffix),
                 (self.time_index.path, stem + ".timeindex" + suffix),
                 (self.txn_index.path, stem + ".txnindex" + suffix),
                 (self.log_path, stem + ".log" + suffix)]
        unlink_quietly(stem + ".txnsnapshot" + suffix)
        for old, new in names:
            try:
                os.replace(old, new)
            except FileNotFoundError:
                if old != self.txn_index.path:     # a transaction index exists only once needed
                    raise
                unlink_quietly(new)
        self._set_paths(directory, suffix)

    # -- opening ----------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, *, now_ms: int,
               index_interval: int, suffix: str = "") -> LogSegment:
        """A new empty segment (files created, truncated or removed if left over)."""
        segment = cls(directory, base_offset, created_ms=now_ms, index_interval=index_interval,
                      suffix=suffix)
        segment.offset_index.reset()
        segment.time_index.reset()
        segment.txn_index.reset()
        unlink_quietly(segment.snapshot_path)
        os.close(os.open(segment.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        return segment

    @classmethod
    def open_existing(cls, directory: str, base_offset: int, *, next_offset: int | None,
                      now_ms: int, index_interval: int) -> LogSegment:
        """Open after a clean shutdown, trusting the indexes unless they are torn.

        ``next_offset`` is known for a closed segment (the next segment's base);
        None for the active one, whose tail is found by walking the headers after
        the last index entry.  Reads no record data.  Raises CorruptSegment
        (KAFKA_STORAGE_ERROR) if those headers are inconsistent, OSError.
        """
        segment = cls(directory, base_offset, created_ms=now_ms, index_interval=index_interval)
        segment.size = os.stat(segment.log_path).st_size
        segment.rebuild_txn_index = not segment.txn_index.is_sane()
        if not (segment.offset_index.is_sane() and segment.time_index.is_sane()):
            segment.rebuild_indexes(why="index file missing or not a whole number of entries")
            return segment
        last_time = segment.time_index.last_entry_on_disk()
        if last_time is not None:
            segment.max_timestamp = last_time[0]
            segment.max_timestamp_offset = base_offset + last_time[1]
        if next_offset is not None:
            segment.next_offset = next_offset
        else:
            last = segment.offset_index.last_entry_on_disk()
            if last is not None and last[1] >= segment.size:
                segment.rebuild_indexes(why=f"last index entry points at file position "
                                            f"{last[1]}, past the end at {segment.size}")
                return segment
            segment._observe_tail(last[1] if last else 0)
        return segment

    def _observe_tail(self, position: int) -> None:
        """Account for the batches from ``position`` (the last offset index entry's) to the end
        without indexing them; the first batch's timestamp (for segment.ms) is read first, as
        ``position`` may lie past it.  Raises CorruptSegment, OSError."""
        if self.size and self.first_batch_timestamp is None:
            self.first_batch_timestamp = next(self.iter_headers(0)).max_timestamp
        for header in self.iter_headers(position):
            self._observe(header, index=False)

    def indexes_look_sane(self) -> bool:
        """Cheap trust check for a closed segment: whole index entries that point inside the log."""
        if not (self.offset_index.is_sane() and self.time_index.is_sane()):
            return False
        last = self.offset_index.last_entry_on_disk()
        try:
            size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            return False
        return last is None or (0 <= last[1] < size and last[0] >= 0)

    # -- reading ----------------------------------------------------------

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def fileno(self) -> int:
        """The open descriptor of the ``.log`` file (opened on first use)."""
        return self._file()

    def read(self, position: int, size: int) -> bytes:
        """Bytes ``[position, position + size)`` of the log file (fewer at its end)."""
        return os.pread(self._file(), size, position)

    def iter_headers(self, position: int = 0, end: int | None = None, *,
                     verify: bool = False) -> Iterator[BatchHeader]:
        """Yield batch headers from ``position`` (a batch start) to ``end``, reading headers only.

        With ``verify``, the CRC of every batch that lies wholly inside a chunk
        read for its header is checked too (the bytes are in memory anyway;
        larger batches are left to the scrub), when the caller asks for the
        next header: a batch the caller stops at is not checked.  Raises CorruptSegment naming
        the file position of a header that is cut short or inconsistent, or
        of a CRC mismatch.
        """
        end = self.size if end is None else end
        fd = self._file()
        while position < end:
            chunk = os.pread(fd, min(HEADER_CHUNK, end - position), position)
            at = 0
            while at < len(chunk):
                try:
                    header = records.read_header(chunk, at, whole=False)
                except KafkaApiError as exc:
                    if len(chunk) - at < records.HEADER_SIZE and position + len(chunk) < end:
                        break                       # header straddles the chunk: read on
                    raise self.corruption(position + at, exc.message) from None
                whole = verify and at + header.size <= len(chunk)
                local = dataclasses.replace(header) if whole else None
                header.position = position + at
                if header.position + header.size > end:
                    raise self.corruption(header.position, f"batch of {header.size} bytes "
                                        f"runs past the end at {end}")
                yield header
                # checked once the caller asks for more, i.e. took this batch
                if local is not None and not records.crc_ok(chunk, local):
                    raise self.corruption(position + at, f"CRC mismatch in batch at offset "
                                        f"{header.base_offset} (stored {header.crc:#010x})")
                at += header.size
            position += at

    def corruption(self, position: int, why: str | None) -> CorruptSegment:
        """The error for damage at file ``position`` of this segment (``why``: the reason)."""
        why = _BUFFER_POSITION.sub("", why or "bad batch").strip(" ,")
        return CorruptSegment(f"{self.log_path} at file position {position}: {why}")

    def find_batch(self, offset: int) -> BatchHeader | None:
        """Header of the batch containing ``offset``, or None if it is past this segment."""
        if offset >= self.next_offset:
            return None
        entry = self._lookup(self.offset_index, max(offset, self.base_offset) - self.base_offset)
        for header in self.iter_headers(entry[1] if entry else 0):
            if header.last_offset >= offset:
                return header
        return None

    def _lookup(self, index, key: int):
        try:
            return index.floor(key)
        except IndexCorrupt as exc:
            self.rebuild_indexes(why=str(exc))
            return index.floor(key)

    def find_timestamp(self, target: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` with timestamp >= target.

        Decodes only the batch that holds the answer.  Raises CorruptSegment, OSError.
        """
        if self.max_timestamp < target or min_offset >= self.next_offset:
            return None
        entry = self._lookup(self.time_index, target)
        start = max(min_offset, self.base_offset + entry[1] if entry else self.base_offset)
        first = self.find_batch(start)
        if first is None:
            return None
        for header in self.iter_headers(first.position):
            if header.last_offset < min_offset or header.max_timestamp < target:
                continue
            for offset, timestamp in self._record_timestamps(header):
                if offset >= min_offset and timestamp >= target:
                    return offset, timestamp
        return None

    def max_timestamp_record(self, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``min_offset`` with the max timestamp.

        Raises CorruptSegment, OSError.
        """
        if self.max_timestamp == NO_TIMESTAMP or min_offset >= self.next_offset:
            return None
        if self.max_timestamp_offset >= min_offset:
            header = self.find_batch(self.max_timestamp_offset)
        else:   # the max lies below the log start offset: walk what is left
            first = self.find_batch(min_offset)
            header = max(self.iter_headers(first.position),
                         key=lambda h: (h.max_timestamp, -h.base_offset))
        if header is None or header.max_timestamp == NO_TIMESTAMP:
            return None
        for offset, timestamp in self._record_timestamps(header):
            if offset >= min_offset and timestamp >= header.max_timestamp:
                return offset, timestamp
        return header.last_offset, header.max_timestamp

    def _record_timestamps(self, header: BatchHeader) -> list[tuple[int, int]]:
        data = self.read(header.position, header.size)
        try:
            local = records.read_header(data, 0)
            return list(records.record_timestamps(data, local))
        except KafkaApiError as exc:
            raise self.corruption(header.position, exc.message) from None

    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime if no record carries one (Kafka's rule)."""
        if self.max_timestamp != NO_TIMESTAMP:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    # -- writing ----------------------------------------------------------

    def append(self, buf, headers: list[BatchHeader], aborted: list[AbortedTxn] = ()) -> None:
        """Write whole batches at the end; ``headers`` positions are relative to ``buf``;
        ``aborted``: transaction index entries for the ABORT markers among them.

        ``buf`` is one bytes-like object or a list of them written back to back
        (one ``writev``: stamped batch prefixes and views of the request's bytes).

        All-or-nothing.  Raises KafkaApiError(KAFKA_STORAGE_ERROR) if a write
        to the log or an index fails (files and memory are back as they were)
        or the transaction index is damaged (nothing written), UndoFailed if
        they cannot be put back.
        """
        saved = _State(self.size, self.next_offset, self.max_timestamp,
                       self.max_timestamp_offset, self.first_batch_timestamp,
                       self._bytes_since_index)
        txn_count = None
        if aborted:
            try:
                txn_count = len(self.txn_index.entries())
            except (TxnIndexCorrupt, OSError) as exc:
                raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                                    f"{self.txn_index.path}: unreadable, nothing appended: "
                                    f"{exc}") from None
        self._index_counts, rebuilt = None, False
        try:
            self.size = saved.size + self._write(buf)
            for header in headers:
                header.position += saved.size
            try:
                for header in headers:
                    self._observe(header)
            except IndexCorrupt as exc:
                rebuilt = True
                self.rebuild_indexes(why=str(exc))
            if aborted:
                self.txn_index.append(aborted)
        except OSError as exc:
            self._undo(saved, rebuilt, exc, txn_count)
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                                f"{self.log_path}: append at file position {saved.size} "
                                f"failed and was undone: {exc}") from None

    def _write(self, buf) -> int:
        """Write ``buf`` (bytes-like, or a list of them) whole, resuming after short writes;
        returns the byte count.  Raises OSError (part of it may be in the file)."""
        return writev_all(self._file(), buf)

    def write_behind(self, interval: int, keep: int) -> None:
        """Page-cache hints after appends (kwire.log.pagecache): start write-back of every
        ``interval`` new bytes, drop pages ``keep`` bytes behind the end.  Never raises."""
        if self._fd is not None:
            self._write_behind.after_append(self._fd, self.size, interval, keep)

    def _undo(self, saved: _State, rebuilt: bool, cause: OSError,
              txn_count: int | None = None) -> None:
        """Cut the log and indexes back to ``saved`` (the transaction index to ``txn_count``
        entries); raises UndoFailed if that fails."""
        try:
            os.ftruncate(self._file(), saved.size)
            self.size = saved.size
            self._write_behind.truncated(saved.size)
            if txn_count is not None:
                self.txn_index.truncate_entries(txn_count)
            if rebuilt:
                self.rebuild_indexes(why="rebuilt during a failed append")
            elif self._index_counts is not None:
                self.offset_index.truncate_entries(self._index_counts[0])
                self.time_index.truncate_entries(self._index_counts[1])
        except (OSError, KafkaApiError) as exc:
            raise UndoFailed(f"{self.log_path}: append at file position {saved.size} failed "
                             f"({cause}) and could not be undone: {exc}") from None
        self.next_offset, self.max_timestamp = saved.next_offset, saved.max_timestamp
        self.max_timestamp_offset = saved.max_timestamp_offset
        self.first_batch_timestamp = saved.first_batch_timestamp
        self._bytes_since_index = saved.bytes_since_index

    def _observe(self, header: BatchHeader, *, index: bool = True) -> None:
        """Account for a batch now in the file; add index entries Kafka's way.

        Raises IndexCorrupt, OSError (an index write failed; that index is unchanged).
        """
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.max_timestamp_offset = header.last_offset
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if index and self._bytes_since_index > self.index_interval:
            if self._index_counts is None:
                self._index_counts = (len(self.offset_index), len(self.time_index))
            self.offset_index.append(header.base_offset - self.base_offset, header.position)
            self._append_time_entry()
            self._bytes_since_index = 0
        self._bytes_since_index += header.size
        self.next_offset = header.next_offset

    def _append_time_entry(self) -> None:
        if self.max_timestamp == NO_TIMESTAMP:
            return
        last = self.time_index.last()
        if last is None or self.max_timestamp > last[0]:
            self.time_index.append(self.max_timestamp, self.max_timestamp_offset - self.base_offset)

    def seal(self) -> None:
        """Record the final max timestamp in the time index (on roll and on close).

        Raises OSError if the entry cannot be written (the index is unchanged).
        """
        try:
            self._append_time_entry()
        except IndexCorrupt as exc:
            self.rebuild_indexes(why=str(exc))

    def rebuild_indexes(self, *, why: str | None = None) -> None:
        """Regenerate both indexes from the batch headers (reads headers only).

        ``why`` (an index found damaged) is logged as a WARNING.  Raises
        CorruptSegment if a header is inconsistent, OSError.
        """
        if why:
            logger.warning("%s: rebuilding the indexes of this segment: %s", self.log_path, why)
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp, self.max_timestamp_offset = NO_TIMESTAMP, self.base_offset
        self.first_batch_timestamp, self.next_offset = None, self.base_offset
        self._bytes_since_index = 0
        self._index_counts = None
        for header in self.iter_headers(0):
            self._observe(header)
        try:
            self.seal()
        except OSError as exc:   # e.g. a full disk during recovery: the entry is an optimisation
            logger.warning("%s: could not write the final time index entry: %s",
                           self.log_path, exc)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``: the batch holding ``offset``
        goes whole (Kafka's LogSegment.truncateTo).  Returns the number of bytes cut.

        Both indexes lose their entries at or after the cut; end offset, max
        timestamp and index spacing are derived again from the last remaining
        entries and the headers after them.  Nothing is fsynced.  Raises
        OSError, CorruptSegment (a header before the cut is damaged).
        """
        header = self.find_batch(offset)
        if header is None:
            return 0
        relative, position = header.base_offset - self.base_offset, header.position
        try:   # both columns ascend: offset index by key, time index by relative offset
            keep = (bisect.bisect_left(self.offset_index.entries(), relative, key=_key),
                    bisect.bisect_left(self.time_index.entries(), relative, key=_value))
        except IndexCorrupt as exc:
            keep, why = None, str(exc)
        os.ftruncate(self._file(), position)
        cut, self.size = self.size - position, position
        self._truncate_txn_index(header.base_offset)
        self._write_behind.truncated(position)
        if keep is None:
            self.rebuild_indexes(why=why)
            return cut
        self.offset_index.truncate_entries(keep[0])
        self.time_index.truncate_entries(keep[1])
        last_time = self.time_index.last()
        self.max_timestamp = last_time[0] if last_time else NO_TIMESTAMP
        self.max_timestamp_offset = self.base_offset + (last_time[1] if last_time else 0)
        self.next_offset, self.first_batch_timestamp = self.base_offset, None
        self._bytes_since_index = 0
        last = self.offset_index.last()
        self._observe_tail(last[1] if last else 0)
        return cut

    def _truncate_txn_index(self, offset: int) -> None:
        """Drop the transaction index entries of markers at or after ``offset``; a damaged
        index is left for the partition's rebuild.  Raises OSError."""
        try:
            self.txn_index.truncate_to(offset)
        except TxnIndexCorrupt as exc:
            logger.warning("%s; it will be rebuilt", exc)
            self.rebuild_txn_index = True

    # -- producer-state snapshot (kwire.log.producer_state owns the format) ----

    def write_snapshot(self, data: bytes, *, sync: bool = False) -> None:
        """Write ``.txnsnapshot`` whole (page cache; fsynced now with ``sync``, else by the
        next ``flush``).  Raises OSError (then no file is left)."""
        write_file(self.snapshot_path, data, sync=sync)
        self._snapshot_unsynced = not sync

    def read_snapshot(self) -> bytes | None:
        """The ``.txnsnapshot`` bytes, None if there is no file.  Raises OSError."""
        return read_file(self.snapshot_path)

    # -- lifecycle --------------------------------------------------------

    def flush(self) -> None:
        """fsync the log, index and snapshot files.  Safe to call from a worker thread."""
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
            if self._snapshot_unsynced:
                self._snapshot_unsynced = False
                fsync_file(self.snapshot_path)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self.offset_index.close()
            self.time_index.close()
            self.txn_index.close()

    def delete(self) -> None:
        """Close and unlink every file of the segment."""
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path,
                     self.txn_index.path, self.snapshot_path):
            unlink_quietly(path)


def _key(entry: tuple[int, int]) -> int:
    return entry[0]


def _value(entry: tuple[int, int]) -> int:
    return entry[1]


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
