"""Removing data from a partition log without truncating its end: DeleteRecords (the log start
offset moves, checkpointed first), retention by time and size (whole closed segments below the
high watermark), and swapping in the segments the log cleaner (kwire.log.cleaner) rewrote.
``TrimmingLog`` is mixed into ``PartitionLog`` (kwire.log.partition) and changes its segment
list under the log's locks.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode, KafkaApiError

from . import checkpoints, cleaner
from .segment import LogSegment


class TrimmingLog:
    """DeleteRecords, retention and the cleaner's segment swap of ``PartitionLog`` (a mixin)."""

    def delete_records(self, before_offset: int) -> int:
        """DeleteRecords: move log_start_offset to ``before_offset`` (-1 = high watermark).

        Returns the new log_start_offset (the low watermark).  Whole segments
        below it are deleted.  Raises KafkaApiError(OFFSET_OUT_OF_RANGE) above
        the high watermark or for negative offsets other than -1; OSError.
        """
        target = self.delete_records_target(before_offset)
        if target is not None:
            self.write_log_start_offset(target)
            self.advance_log_start(target)
        return self.log_start_offset

    # delete_records in three steps, so the server can run the middle one in a worker thread.
    def delete_records_target(self, before_offset: int) -> int | None:
        """The log start offset DeleteRecords moves to, or None if it would not move.  No I/O;
        raises as ``delete_records``."""
        if before_offset == -1:
            before_offset = self.high_watermark
        if before_offset < 0 or before_offset > self.high_watermark:
            raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                f"{self.path}: cannot delete records before {before_offset}, "
                                f"high watermark is {self.high_watermark}")
        self.health.check_online()
        return before_offset if before_offset > self.log_start_offset else None

    def write_log_start_offset(self, offset: int) -> None:
        """Checkpoint ``offset`` as the log start (fsyncs; safe in a worker thread).  Raises OSError."""
        checkpoints.write_log_start_offset(self.path, offset)

    def advance_log_start(self, offset: int) -> None:
        """Move the log start to a checkpointed ``offset`` and delete the segments below it."""
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._delete_oldest(lambda s: s.next_offset <= self.log_start_offset)

    def apply_retention(self, now_ms: int) -> int:
        """Delete closed segments past retention.ms (by largest timestamp) or beyond retention.bytes.

        Returns the number of segments deleted; moves log_start_offset.  An
        offline partition is left alone.
        """
        if self.health.offline:
            return 0
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

    # -- the log cleaner (kwire.log.cleaner) -------------------------------

    @property
    def truncations(self) -> int:
        """Changes whenever a truncation moves the log end back (a clean planned before is stale)."""
        return self._truncations

    def producer_entries(self):
        """(producer id, entry) of every producer this log remembers (read only)."""
        return self._producers.entries()

    def replace_segments(self, groups: list[tuple[list[LogSegment], LogSegment]], truncations: int,
                         pause=lambda: None) -> bool:
        """Swap the log cleaner's ``.swap`` segments in for the segments they replace (each
        pair: the old segments, in order, and their cleaned copy): the old files are unlinked
        (readers keep their descriptors), the cleaned files renamed live, the segment list
        replaced in one assignment.  Owner thread, no await: a fetch never sees half of it.

        Returns False, changing nothing, if the log changed meanwhile (truncated, offline,
        an old segment deleted by retention) or a truncation or scrub holds the files (try
        again later).  ``pause`` is the cleaner's fault-injection point.  Raises OSError
        (a rename failed: the files are as a crash would leave them, which the next open
        completes; the partition is taken offline).
        """
        if self.health.offline or truncations != self._truncations:
            return False
        if not self._files_lock.acquire(blocking=False):
            return False
        try:
            segments = self.segments
            old = [s for group, _new in groups for s in group]
            try:
                first = segments.index(old[0])
            except ValueError:
                return False
            if segments[first:first + len(old)] != old or first + len(old) >= len(segments):
                return False
            try:
                for group, new in groups:
                    for segment in group:
                        if segment.base_offset != new.base_offset:
                            segment.delete()
                pause()
                for group, new in groups:
                    new.rename("")
                    cleaner.swap_done(new)
            except OSError as exc:
                self.health.take_offline(f"the log cleaner's swap failed: {exc}; restart to "
                                         "complete it")
                raise
            with self._lock:
                self.segments = segments[:first] + [new for _g, new in groups] + segments[first + len(old):]
                self._unflushed_segments = [s for s in self._unflushed_segments if s not in old]
            for segment in old:
                segment.close()
            return True
        finally:
            self._files_lock.release()
