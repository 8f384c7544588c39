"""Moving a partition's log to another log dir while it is served (AlterReplicaLogDirs, KIP-113).

The copy is a second PartitionLog in ``<dest>/<topic>-<partition>`` (Kafka's "future
replica") holding a ``.kwire-future`` marker until it takes over.  It is filled the way a
follower fills its log: batches read from the current log are appended as they are, so
offsets, leader epochs and producer state carry over (``copy``).  ``take_over``, called with
no await between its last copy and its end, copies the tail, makes the copy durable,
writes ``.kwire-moved`` into the old directory, removes the new one's marker (the commit
point) and makes the PartitionLog object itself use the new files, so every holder of it
(leader state, fetchers, fetch sessions, the cleaner) carries on unaware; the old
directory is deleted afterwards (``delete_old``).

After a crash (``resolve``, called by kwire.log.manager at start-up): a copy whose origin
has no ``.kwire-moved`` marker was unfinished and is deleted; one whose origin has it is
the partition, and the origin is deleted.
"""
from __future__ import annotations

import logging
import os
import shutil

from . import checkpoints
from .checkpoints import write_atomically
from .partition import PartitionLog

logger = logging.getLogger(__name__)

FUTURE_MARKER = ".kwire-future"
MOVED_MARKER = ".kwire-moved"
RESTART = -1            # ``copy``: the current log moved away from the copy; start it over


class Busy(Exception):
    """A truncation or scrub holds the partition's files: ``take_over`` later."""


class LogMove:
    """A copy of ``plog`` being built in log dir ``dest_dir``."""

    def __init__(self, plog: PartitionLog, dest_dir: str):
        self.plog = plog
        self.dest_dir = dest_dir
        self.path = os.path.join(dest_dir, os.path.basename(plog.path))
        self.future: PartitionLog | None = None
        self._truncations = plog._truncations

    # -- the copy ---------------------------------------------------------------------
    def create(self, now_ms: int) -> None:
        """Start the copy empty at the current log start.  Blocking.  Raises OSError."""
        if os.path.exists(self.path):
            shutil.rmtree(self.path)
        os.makedirs(self.path)
        write_atomically(os.path.join(self.path, FUTURE_MARKER), b"")
        future = PartitionLog.open(self.path, self.plog.config, now_ms=now_ms, recover=False)
        if future.offline:
            raise OSError(future.health.offline_reason)
        future.enable_replication()
        self.future = future
        self.restart()

    def restart(self) -> None:
        """Empty the copy and start it again at the current log start.  Blocking."""
        self._truncations = self.plog._truncations
        self.future.truncate_fully_and_start_at(self.plog.log_start_offset)

    @property
    def lag(self) -> int:
        """Offsets the copy is behind the current log (Kafka's future replica offset lag)."""
        return max(0, self.plog.log_end_offset - self.future.log_end_offset)

    def copy(self, max_bytes: int, now_ms: int) -> int:
        """Append the next batches (up to about ``max_bytes``) of the current log to the copy;
        the bytes copied, or RESTART when the current log was truncated or its start passed
        the copy's end (retention, DeleteRecords).  Page cache only: on the owner thread.
        Raises KafkaApiError (KAFKA_STORAGE_ERROR)."""
        plog, future = self.plog, self.future
        if plog._truncations != self._truncations or plog.log_start_offset > future.log_end_offset \
                or future.log_end_offset > plog.log_end_offset:
            return RESTART
        if future.log_end_offset >= plog.log_end_offset:
            return 0
        slices = plog.read_slices(future.log_end_offset, max_bytes, min_one_batch=True,
                                  max_offset=plog.log_end_offset)
        if not slices:
            return 0
        data = slices.to_bytes()
        future.append_as_follower(data, now_ms=now_ms)
        return len(data)

    # -- the switch -------------------------------------------------------------------
    def take_over(self, now_ms: int) -> None:
        """Copy the tail and switch ``plog`` to the copy's files (see the module doc).  Call
        it with no await since the last ``copy`` that found the copy caught up; blocks on
        a few small fsyncs.  Raises Busy, OSError or KafkaApiError (nothing switched then)."""
        plog, future = self.plog, self.future
        if not plog._files_lock.acquire(blocking=False):
            raise Busy(plog.path)
        try:
            self._take_over(now_ms)
        finally:
            plog._files_lock.release()

    def _take_over(self, now_ms: int) -> None:
        plog, future = self.plog, self.future
        while future.log_end_offset < plog.log_end_offset:
            if self.copy(1 << 20, now_ms) in (0, RESTART):
                raise OSError(f"{plog.path}: the copy cannot catch up")
        if plog.log_start_offset > future.log_start_offset:
            future.advance_log_start(plog.log_start_offset)
            checkpoints.write_log_start_offset(self.path, plog.log_start_offset)
        future._epochs.entries = list(plog._epochs.entries)   # an epoch begun at the log end included
        future._epochs._save()
        if plog.replicated:
            checkpoints.write_high_watermark(self.path, plog.high_watermark)
        cleaned = checkpoints.read_cleaner_offset(plog.path)
        if cleaned is not None:
            checkpoints.write_cleaner_offset(self.path, cleaned)
        future.flush()
        write_atomically(os.path.join(plog.path, MOVED_MARKER), b"")
        os.unlink(os.path.join(self.path, FUTURE_MARKER))
        checkpoints.fsync_directory(self.path)
        old_path, old_segments = plog.path, plog.segments
        self.old = (old_path, old_segments)
        with plog._lock:
            plog.path = future.path
            plog.segments = future.segments
            plog._epochs = future._epochs
            plog._producers = future._producers
            plog.log_start_offset = future.log_start_offset
            plog._end_point = future._end_point
            plog._flushed_point = future._flushed_point
            plog._checkpointed_point = future._checkpointed_point
            plog._unflushed_messages = future._unflushed_messages
            plog._unflushed_segments = future._unflushed_segments
            plog._checkpointed_hw = plog.high_watermark if plog.replicated else None
            plog._truncations += 1            # readers holding old positions look again
        plog.health.name = future.path
        future.segments = []
        logger.info("%s: moved to %s", old_path, future.path)

    def delete_old(self) -> None:
        """Close the old directory's files and remove it.  Blocking."""
        old_path, old_segments = self.old
        for segment in old_segments:
            segment.close()
        shutil.rmtree(old_path, ignore_errors=True)

    def abandon(self) -> None:
        """Drop an unfinished copy.  Blocking."""
        if self.future is not None:
            self.future.delete()
        elif os.path.exists(self.path):
            shutil.rmtree(self.path, ignore_errors=True)


def resolve(candidates: list[str]) -> str | None:
    """The directory of a partition found in ``candidates`` (its folder in several log dirs),
    settling a move a crash interrupted; the others are removed.  None if none is left.
    Blocking."""
    moved = [p for p in candidates if os.path.exists(os.path.join(p, MOVED_MARKER))]
    keep = None
    for path in candidates:
        if path in moved:
            continue
        if os.path.exists(os.path.join(path, FUTURE_MARKER)):
            if moved:                     # the commit point was passed: the copy is the partition
                os.unlink(os.path.join(path, FUTURE_MARKER))
                checkpoints.fsync_directory(path)
            else:                         # unfinished: the origin is still the partition
                logger.warning("%s: removing an unfinished copy of a log-dir move", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
        if keep is None:
            keep = path
    if keep is None and moved:          # a moved marker with no copy anywhere: keep the data
        keep = moved[0]
        os.unlink(os.path.join(keep, MOVED_MARKER))
        moved = moved[1:]
    for path in moved:
        logger.warning("%s: removing the origin of a finished log-dir move", path)
        shutil.rmtree(path, ignore_errors=True)
    return keep


__all__ = ["FUTURE_MARKER", "MOVED_MARKER", "RESTART", "Busy", "LogMove", "resolve"]
