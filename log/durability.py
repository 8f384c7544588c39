"""Making a partition log durable and putting it away: ``flush`` (fsync, run in a worker thread,
may overlap ``append``/``read``), the recovery-point checkpoint an unclean start checks from
(kwire.log.recovery), the clean ``close``, the one-off ``scrub`` of closed segments after start,
and ``delete``.  ``DurableLog`` is mixed into ``PartitionLog`` (kwire.log.partition) and shares
its locks and flush bookkeeping.
"""
from __future__ import annotations

import logging
import shutil

from kwire.codecs.errors import ErrorCode, KafkaApiError

from . import checkpoints, recovery

logger = logging.getLogger("kwire.log.partition")   # the name these messages always had

RECOVERY_POINT_INTERVAL_MS = 60_000   # Kafka's log.flush.offset.checkpoint.interval.ms


class DurableLog:
    """fsync, checkpoints, close, scrub and delete of ``PartitionLog`` (a mixin)."""

    def flush(self, now_ms: int | None = None) -> None:
        """fsync everything written so far; ``now_ms`` restarts the flush.ms clock and, at
        most every RECOVERY_POINT_INTERVAL_MS, writes the recovery-point checkpoint.

        Blocking: run it in a worker thread (it may overlap ``append``/``read``).
        Raises KafkaApiError(KAFKA_STORAGE_ERROR) if an fsync fails, which
        takes the partition offline (dirty pages may be lost: Kafka's rule).
        """
        with self._lock:
            if now_ms is not None:
                self._last_flush_ms = now_ms
            pending = self._unflushed_segments + self.segments[-1:]
            self._unflushed_segments = []
            self._unflushed_messages = 0
            point, truncations = self._end_point, self._truncations
        try:
            for segment in pending:
                segment.flush()
        except OSError as exc:
            self.health.take_offline(f"fsync failed: {exc}")
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                                f"{self.path}: fsync failed: {exc}") from None
        with self._lock:   # a truncation meanwhile made ``point`` meaningless
            if truncations == self._truncations and (
                    self._flushed_point is None or point > self._flushed_point):
                self._flushed_point = point
        if now_ms is not None and now_ms - self._last_checkpoint_ms >= RECOVERY_POINT_INTERVAL_MS:
            self.write_recovery_point(now_ms)

    def flush_due(self, now_ms: int) -> bool:
        """True if flush.ms has elapsed with something unflushed, a rolled segment awaits
        its flush (Kafka flushes on roll), or the recovery point or (replicated mode) the high
        watermark is due to be checkpointed.

        Non-blocking; pair with ``flush(now_ms)`` in a worker thread.
        """
        if self.health.offline or not self.segments:
            return False
        unflushed = self._unflushed_messages > 0 or bool(self._unflushed_segments)
        return (bool(self._unflushed_segments)
                or (unflushed and now_ms - self._last_flush_ms >= self.config.flush_interval_ms)
                or ((self._flushed_point != self._checkpointed_point or self._hw_unsaved())
                    and now_ms - self._last_checkpoint_ms >= RECOVERY_POINT_INTERVAL_MS))

    def write_recovery_point(self, now_ms: int) -> bool:
        """Checkpoint what the last ``flush`` made durable, and the high watermark in replicated
        mode; True if the recovery-point checkpoint is current.

        Blocking.  A failed write is logged at ERROR and only means a crash
        recovery would check more (or start from an older high watermark); never raises.
        """
        with self._checkpoint_lock:
            self._checkpoint_high_watermark(now_ms)
            point = self._flushed_point
            if point is None or point == self._checkpointed_point:
                return point is not None
            self._last_checkpoint_ms = now_ms
            try:
                checkpoints.write_recovery_point(self.path, point)
            except OSError as exc:
                logger.error("%s: could not write the recovery-point checkpoint (a crash "
                             "recovery would check from an earlier point): %s", self.path, exc)
                return False
            self._checkpointed_point = point
            return True

    def close(self) -> bool:
        """Clean shutdown: record final max timestamps, fsync, checkpoint the recovery
        point and close every file.

        Returns False (after logging at ERROR) if that could not all be done or
        the partition is offline: its log dir must then be recovered at the
        next start.  Never raises.
        """
        clean = not self.health.offline and bool(self.segments)
        if clean:
            try:
                self.segments[-1].seal()
                self.flush()
                clean = self.write_recovery_point(self._last_checkpoint_ms)
            except (OSError, KafkaApiError) as exc:
                logger.error("%s: clean close failed: %s", self.path, exc)
                clean = False
        for segment in self.segments:
            segment.close()
        return clean

    def scrub(self) -> bool:
        """Check every batch of every closed segment (CRC included), once after start.

        Blocking: run it in a worker thread (it reads with descriptors of its
        own, so it may overlap ``append``/``read``/retention; a truncation waits for the
        segment being checked).  Damage takes
        the partition offline with an ERROR naming file and position; returns
        False then.
        """
        for segment in self.segments[:-1]:
            if self.health.offline:
                return False
            with self._files_lock:
                if segment not in self.segments[:-1]:     # deleted or truncated meanwhile
                    continue
                damage = recovery.find_damage(segment)
            if damage is not None:
                self.health.take_offline(f"corrupt data at rest: {damage}")
                return False
        return not self.health.offline

    def delete(self) -> None:
        """Close the files and remove the partition directory."""
        for segment in self.segments:
            segment.close()
        shutil.rmtree(self.path, ignore_errors=True)
