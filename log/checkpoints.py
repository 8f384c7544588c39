"""Small text checkpoint files in a partition directory, replaced atomically.

``leader-epoch-checkpoint`` (Kafka's layout)::

    0                   version
    2                   number of entries
    0 0                 leader epoch, start offset of that epoch
    3 150

``log-start-offset-checkpoint`` (one partition per directory here)::

    0                   version
    150                 log start offset

Writes go to ``<file>.tmp``, are fsynced and renamed over the old file, so a
crash leaves either the old or the new content.  This blocks briefly; these
files change only on leadership changes and DeleteRecords.
"""
from __future__ import annotations

import bisect
import os

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` durably.  Raises OSError."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_lines(path: str) -> list[str] | None:
    """The lines of a checkpoint with a known version, or None if missing/unreadable."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().split("\n")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if not lines or lines[0].strip() != str(VERSION):
        return None
    return [line for line in lines[1:] if line.strip()]


def read_log_start_offset(directory: str) -> int | None:
    """The checkpointed log start offset, or None if absent or malformed."""
    lines = _read_lines(os.path.join(directory, LOG_START_OFFSET_FILE))
    try:
        return int(lines[0]) if lines else None
    except ValueError:
        return None


def write_log_start_offset(directory: str, offset: int) -> None:
    write_atomically(os.path.join(directory, LOG_START_OFFSET_FILE), f"{VERSION}\n{offset}\n")


class LeaderEpochCache:
    """Ascending (leader_epoch, start_offset) entries, backed by leader-epoch-checkpoint."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, LEADER_EPOCH_FILE)
        self.entries: list[tuple[int, int]] = self._load()

    def _load(self) -> list[tuple[int, int]]:
        lines = _read_lines(self.path)
        if not lines:
            return []
        try:
            count = int(lines[0])
            entries = [(int(e), int(o)) for e, o in (line.split() for line in lines[1:count + 1])]
        except ValueError:
            return []
        return sorted(entries)

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
        """Forget epochs that start after ``end_offset`` (after a log truncation)."""
        kept = [(e, o) for e, o in self.entries if o <= end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch <= ``epoch``, its end offset).

        The end offset is the start of the next higher epoch, or the log end
        offset for the latest epoch; (-1, -1) if ``epoch`` is above all known.
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
