"""Small text checkpoint files in a partition directory, replaced atomically.

``leader-epoch-checkpoint`` (Kafka's layout)::

    0                   version
    2                   number of entries
    0 0                 leader epoch, start offset of that epoch
    3 150

``log-start-offset-checkpoint`` (one partition per directory here)::

    0                   version
    150                 log start offset

``high-watermark-checkpoint`` (replicated partitions only; Kafka keeps one
replication-offset-checkpoint per log dir, here one per partition)::

    0                   version
    150                 high watermark

``recovery-point-checkpoint`` (Kafka keeps one recovery-point-offset-checkpoint
per log dir; here one per partition, with the segment and file position)::

    0                   version
    150 100 4096        recovery point offset, base offset of its segment, file position

``cleaner-offset-checkpoint`` (compacted logs; Kafka keeps one per log dir)::

    0                   version
    150                 first dirty offset: the log cleaner has cleaned everything below

The recovery point is the offset up to which the log was flushed (fsynced)
after being validated on append: an unclean start checks batches only from
there on, so damage at rest below it is never a reason to cut later data.

``write_atomically`` is the one atomic-replace helper of the broker's files:
write ``<file>.tmp``, fsync it, rename it over the old file, fsync the
directory; a crash leaves either the old or the new content.  It blocks.

A checkpoint that exists but cannot be parsed raises ``CheckpointError``
rather than reading as empty: an empty log-start-offset checkpoint would
silently bring records deleted by DeleteRecords back.  A missing file is
normal (nothing checkpointed yet) and reads as None / no entries.
"""
from __future__ import annotations

import bisect
import os

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
RECOVERY_POINT_FILE = "recovery-point-checkpoint"
HIGH_WATERMARK_FILE = "high-watermark-checkpoint"
CLEANER_OFFSET_FILE = "cleaner-offset-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class CheckpointError(Exception):
    """A checkpoint file exists but is unreadable or malformed (message names the file)."""


def write_atomically(path: str, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` durably (file and directory fsynced).

    Raises OSError; the temporary file is removed if the write fails.
    """
    tmp = path + ".tmp"
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_directory(os.path.dirname(path) or ".")


def fsync_directory(directory: str) -> None:
    """Make creating, renaming and removing files in ``directory`` durable.  Raises OSError."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _read_lines(path: str) -> list[str] | None:
    """The non-blank lines after the version line, or None if the file is missing.

    Raises CheckpointError if it is unreadable or its version is unknown.
    """
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable: {exc}") from None
    if lines[0].strip() != str(VERSION):
        raise CheckpointError(f"{path}: unknown version {lines[0].strip()[:20]!r}")
    return [line for line in lines[1:] if line.strip()]


def _ints(path: str, line: str, count: int) -> list[int]:
    try:
        values = [int(v) for v in line.split()]
    except ValueError:
        values = []
    if len(values) != count or any(v < 0 for v in values):
        raise CheckpointError(f"{path}: malformed line {line[:40]!r}")
    return values


def _read_offset(path: str) -> int | None:
    """The single offset of a one-value checkpoint, or None if the file is missing.
    Raises CheckpointError if it is malformed."""
    lines = _read_lines(path)
    if lines is None:
        return None
    if len(lines) != 1:
        raise CheckpointError(f"{path}: expected one offset, found {len(lines)} line(s)")
    return _ints(path, lines[0], 1)[0]


def read_log_start_offset(directory: str) -> int | None:
    """The checkpointed log start offset, or None if there is no checkpoint.

    Raises CheckpointError if the file is malformed (never guess: a wrong
    value would expose deleted records).
    """
    return _read_offset(os.path.join(directory, LOG_START_OFFSET_FILE))


def write_log_start_offset(directory: str, offset: int) -> None:
    write_atomically(os.path.join(directory, LOG_START_OFFSET_FILE), f"{VERSION}\n{offset}\n")


def read_cleaner_offset(directory: str) -> int | None:
    """The log cleaner's first dirty offset (where its last clean ended), or None if the log
    was never cleaned.  Raises CheckpointError if the file is malformed."""
    return _read_offset(os.path.join(directory, CLEANER_OFFSET_FILE))


def write_cleaner_offset(directory: str, offset: int) -> None:
    """Replace the cleaner checkpoint.  Raises OSError."""
    write_atomically(os.path.join(directory, CLEANER_OFFSET_FILE), f"{VERSION}\n{offset}\n")


def read_high_watermark(directory: str) -> int | None:
    """The checkpointed high watermark, or None if never written.

    Raises CheckpointError if the file is malformed (a guess could expose
    uncommitted records to consumers).
    """
    return _read_offset(os.path.join(directory, HIGH_WATERMARK_FILE))


def write_high_watermark(directory: str, offset: int) -> None:
    """Replace the high-watermark checkpoint.  Raises OSError."""
    write_atomically(os.path.join(directory, HIGH_WATERMARK_FILE), f"{VERSION}\n{offset}\n")


def read_recovery_point(directory: str) -> tuple[int, int, int] | None:
    """(offset, segment base offset, file position), or None if never checkpointed.

    Raises CheckpointError if the file is malformed.
    """
    path = os.path.join(directory, RECOVERY_POINT_FILE)
    lines = _read_lines(path)
    if lines is None:
        return None
    if len(lines) != 1:
        raise CheckpointError(f"{path}: expected one line, found {len(lines)}")
    offset, base, position = _ints(path, lines[0], 3)
    return offset, base, position


def write_recovery_point(directory: str, point: tuple[int, int, int]) -> None:
    """Replace the recovery-point checkpoint.  Raises OSError."""
    write_atomically(os.path.join(directory, RECOVERY_POINT_FILE),
                     f"{VERSION}\n{point[0]} {point[1]} {point[2]}\n")


class LeaderEpochCache:
    """Ascending (leader_epoch, start_offset) entries, backed by leader-epoch-checkpoint."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, LEADER_EPOCH_FILE)
        self.entries: list[tuple[int, int]] = []

    def load(self) -> None:
        """Read the checkpoint (none: no entries).  Raises CheckpointError if malformed."""
        lines = _read_lines(self.path)
        if not lines:
            self.entries = []
            return
        count = _ints(self.path, lines[0], 1)[0]
        if count != len(lines) - 1:
            raise CheckpointError(f"{self.path}: {count} entries announced, "
                                  f"{len(lines) - 1} present")
        self.entries = sorted(tuple(_ints(self.path, line, 2)) for line in lines[1:])

    def _save(self) -> None:
        body = "".join(f"{epoch} {offset}\n" for epoch, offset in self.entries)
        write_atomically(self.path, f"{VERSION}\n{len(self.entries)}\n{body}")

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns False for a stale epoch.

        Entries starting at or after ``start_offset`` are dropped (they would be
        empty epochs).  Raises OSError if the checkpoint cannot be written.
        """
        latest = self.latest_epoch
        if latest is not None and epoch <= latest:
            return epoch == latest
        self.entries = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries.append((epoch, start_offset))
        self._save()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (Kafka's truncateFromEnd: after
        a log truncation to ``end_offset`` they hold no data).  Raises OSError."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def clear(self) -> None:
        """Forget every epoch (the log was emptied).  Raises OSError."""
        if self.entries or os.path.exists(self.path):
            self.entries = []
            self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch <= ``epoch``, its end offset).

        Kafka's LeaderEpochFileCache.endOffsetFor, case by case: the latest
        epoch ends at ``log_end_offset``; an older one at the start of the next
        higher epoch, answered with the largest known epoch <= ``epoch``; an
        ``epoch`` below every known one answers ``(epoch, start of the first
        known epoch)`` (the data before it is gone, so the follower copies from
        there; Kafka's doc comment says UNDEFINED here, its code does this);
        (-1, -1) for UNDEFINED_EPOCH, an ``epoch`` above every known one, or an
        empty cache.
        """
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor_epoch = epochs[higher - 1] if higher else epoch
        return floor_epoch, self.entries[higher][1]
