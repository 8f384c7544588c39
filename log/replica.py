"""What a partition log does as a Kafka replica (ZooKeeper-era replication, KIP-101/279).

``ReplicaLog`` is mixed into ``PartitionLog``; its methods use the log's
segments and bookkeeping directly.

Modes.  A log opens in single-node mode, where every append moves the high
watermark to the log end offset.  ``enable_replication`` switches it to
replicated mode for good: appends leave the high watermark alone and the
cluster layer moves it with ``update_high_watermark`` (a leader once the ISR
has the records, a follower to min(leader's high watermark, own log end
offset)).  It only moves back through truncation.  In replicated mode it is
checkpointed in ``high-watermark-checkpoint`` (kwire.log.checkpoints) whenever
the recovery point is, never per update; a restart takes min(checkpoint, log
end offset), so a lost update only makes the high watermark lag.

Follower operations:

* ``append_as_follower``: batches fetched from the leader are stored byte for
  byte (offsets and partition leader epochs already stamped), after a check of
  framing, magic and CRC only: a leader's batch may be LogAppendTime or a
  control batch, which Produce validation rejects.  A trailing partial batch
  (the leader cut the response at its byte limit) is left for the next fetch.
  The first batch must start at or after the log end offset and batches must
  ascend (gaps are where a leader's log cleaner dropped batches); Kafka raises
  UnexpectedAppendOffsetException, not a protocol error, so kwire answers
  UNKNOWN_SERVER_ERROR and the fetcher truncates again.  Batches of an epoch
  newer than the cache's latest start it there; producer state is replayed
  as on load (no sequence checks: the leader made them), so a follower that
  becomes leader recognises a retried idempotent batch, and transactions
  (kwire.log.producer_state) follow the leader's: transactional batches open
  them, control batches (their one record read) end them, and ABORT markers
  go into the transaction index with the same last stable offset the leader
  computed.
* ``truncate_to``: Kafka's truncation, the batch holding the target offset goes
  whole; files are cut, fsynced and the recovery point rewritten before it
  returns, so an unclean restart cannot bring truncated batches back.
* ``truncate_fully_and_start_at``: the follower fell below the leader's log
  start; everything goes and the log restarts empty at the leader's start.

Threads.  ``append_as_follower``, ``update_high_watermark`` and
``enable_replication`` run on the owner thread (page cache only; an epoch
change fsyncs ``leader-epoch-checkpoint``, as ``set_leader_epoch`` does).  The
truncations block on the disk: run them in a worker thread, never overlapping
``append``/``read`` of the same log (the caller serialises those); ``flush``
and ``scrub`` may overlap them.  Any I/O failure during a truncation takes the
partition offline (kwire.log.health): the files may be half cut.
"""
from __future__ import annotations

import dataclasses
import logging

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import BatchHeader

from . import checkpoints, recovery
from .segment import LogSegment, bisect_segments

logger = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class AppendResult:
    """What ``PartitionLog.append`` and ``append_as_follower`` did."""
    base_offset: int
    last_offset: int
    log_append_time_ms: int       # -1 with CreateTime (and on a follower)
    log_start_offset: int
    duplicate: bool               # a retried idempotent batch: nothing was appended
    record_count: int
    needs_flush: bool             # flush.messages reached: run flush() in a worker thread
    valid_bytes: int = 0          # bytes of the input appended (whole batches)


class ReplicaLog:
    """Replicated mode and follower operations of ``PartitionLog`` (a mixin)."""

    # -- high watermark -----------------------------------------------------

    def enable_replication(self) -> None:
        """Switch to replicated mode (idempotent): appends stop moving the high watermark,
        which restarts at min(checkpointed high watermark or 0, log end offset), no lower
        than the log start offset.  No I/O."""
        if self.replicated:
            return
        self.replicated = True
        self.high_watermark = self._clamp(self._checkpointed_hw or 0)

    def update_high_watermark(self, offset: int) -> bool:
        """Move the high watermark up to ``offset``, clamped to [log_start_offset,
        log_end_offset]; True if it moved.  A lower value is ignored (only truncation moves
        it back).  No I/O: it is checkpointed with the recovery point."""
        offset = self._clamp(offset)
        if offset <= self.high_watermark:
            return False
        self.high_watermark = offset
        self._producers.on_high_watermark(offset)   # markers below it no longer hold the LSO
        return True

    def _clamp(self, offset: int) -> int:
        return min(max(offset, self.log_start_offset), self.log_end_offset)

    def _hw_unsaved(self) -> bool:
        return self.replicated and self.high_watermark != self._checkpointed_hw

    def _checkpoint_high_watermark(self, now_ms: int) -> None:
        """Write the high-watermark checkpoint if it is stale (caller holds the checkpoint
        lock).  Blocking; a failure is logged at ERROR (a restart would start from an older
        high watermark, which is safe); never raises."""
        if not self._hw_unsaved():
            return
        hw = self.high_watermark
        self._last_checkpoint_ms = now_ms
        try:
            checkpoints.write_high_watermark(self.path, hw)
        except OSError as exc:
            logger.error("%s: could not write the high-watermark checkpoint: %s", self.path, exc)
            return
        self._checkpointed_hw = hw

    # -- leader epochs --------------------------------------------------------

    def latest_epoch(self) -> int | None:
        """The latest leader epoch in the leader-epoch cache, None if it is empty."""
        return self._epochs.latest_epoch

    # -- follower append ------------------------------------------------------

    def append_as_follower(self, records_data, *, now_ms: int) -> AppendResult:
        """Append batches fetched from the leader unchanged; returns an AppendResult whose
        ``valid_bytes`` says how much of ``records_data`` was used (a trailing partial batch is
        not).  Nothing whole to append (empty input included): no-op, record_count 0.

        Leaves high_watermark and leader_epoch alone.  Raises KafkaApiError:
        CORRUPT_MESSAGE (a whole batch fails framing, magic 2 or CRC checks, or a control
        batch's record cannot be decoded; nothing appended), UNKNOWN_SERVER_ERROR (a batch
        below log_end_offset or batches going backwards: Kafka's
        UnexpectedAppendOffsetException; nothing appended),
        KAFKA_STORAGE_ERROR (write failed and was undone, or the partition is offline; the
        leader-epoch checkpoint failing after the write takes it offline).  Never fsyncs
        the log.
        """
        self.health.check_online()
        headers, valid = self._whole_batches(records_data)
        base = self.log_end_offset
        if not headers:
            return AppendResult(base, base - 1, -1, self.log_start_offset, False, 0, False, 0)
        epochs, latest = [], self._epochs.latest_epoch
        for header in headers:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                epochs.append((epoch, header.base_offset))
                latest = epoch
        markers = [records.control_marker(records_data, header) for header in headers]
        pending = self._producers.plan_replay(list(zip(headers, markers)))
        count, needs_flush = self._write([memoryview(records_data)[:valid]], valid, headers,
                                         now_ms, pending)
        try:
            for epoch, start_offset in epochs:
                self._epochs.assign(epoch, start_offset)
        except OSError as exc:
            raise self._storage_failure("writing the leader-epoch checkpoint", exc) from None
        return AppendResult(base, self.log_end_offset - 1, -1, self.log_start_offset, False,
                            count, needs_flush, valid)

    def _whole_batches(self, data) -> tuple[list[BatchHeader], int]:
        """Headers of the whole, valid batches at the start of ``data`` and their byte count.
        Raises KafkaApiError: CORRUPT_MESSAGE, UNKNOWN_SERVER_ERROR (offsets)."""
        headers, valid = records.scan_valid_prefix(data)
        rest = len(data) - valid
        claimed = records.batch_size_at(data, valid)
        if rest and ((claimed is not None and claimed <= rest)
                     or (rest > records.MAGIC_OFFSET and data[valid + records.MAGIC_OFFSET] != 2)):
            why = recovery.describe_damage(memoryview(data)[valid:])
            raise KafkaApiError(ErrorCode.CORRUPT_MESSAGE,
                                f"{self.path}: fetched batch at byte {valid} of {len(data)}: {why}")
        expected = self.log_end_offset
        for header in headers:
            # a gap is fine: the leader's cleaner may have dropped whole batches
            if header.base_offset < expected:
                raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, (
                    f"{self.path}: fetched batch starts at offset {header.base_offset}, expected "
                    f"{expected} or later (log end offset {self.log_end_offset}); unexpected "
                    f"append offset"))
            expected = header.next_offset
        return headers, valid

    # -- truncation -------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (the batch holding ``offset``
        goes whole, so log_end_offset becomes its base offset, or ``offset`` at a batch
        boundary).  No-op if ``offset`` >= log_end_offset; below the first segment it is
        ``truncate_fully_and_start_at(offset)``, as in Kafka.

        Cuts the files, drops the leader epochs starting at or after the new end,
        rebuilds producer state, clamps high_watermark and log_start_offset to the new end
        and checkpoints the recovery point.  Blocking (fsyncs).  Raises ValueError for a
        negative offset; KafkaApiError(KAFKA_STORAGE_ERROR) if the partition is offline or
        an I/O fails (which takes it offline).
        """
        if offset < 0:
            raise ValueError(f"{self.path}: cannot truncate to negative offset {offset}")
        self.health.check_online()
        if offset >= self.log_end_offset:
            return
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        before = self.log_end_offset
        try:
            with self._files_lock:
                self._truncate(offset)
        except (OSError, KafkaApiError) as exc:
            raise self._storage_failure(f"truncation to offset {offset}", exc) from None
        logger.info("%s: truncated from log end offset %d to %d", self.path, before,
                    self.log_end_offset)

    def _truncate(self, offset: int) -> None:
        """Raises OSError, CorruptSegment."""
        i = max(0, bisect_segments(self.segments, offset))
        segment, doomed = self.segments[i], self.segments[i + 1:]
        with self._lock:       # flush() in a worker thread reads these
            self.segments = self.segments[:i + 1]
            unflushed = [s for s in self._unflushed_segments if s in self.segments]
            self._unflushed_segments, self._unflushed_messages = [], 0
            self._truncations += 1
        for old in reversed(doomed):       # newest first: a crash leaves a contiguous log
            old.delete()
        segment.truncate_to(offset)
        for kept in unflushed + [segment]:  # durable before the recovery point says so
            kept.flush()
        checkpoints.fsync_directory(self.path)
        end = segment.next_offset
        self._moved_end(end, (end, segment.base_offset, segment.size))
        self.log_start_offset = min(self.log_start_offset, end)
        self._epochs.truncate_from_end(end)
        self._rebuild_producer_state()
        self._checkpoint_truncation()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``: log_start_offset =
        log_end_offset = high_watermark = ``offset``; the leader-epoch cache and producer
        state are cleared (leader_epoch is left alone).  The new segment keeps the old active
        segment's creation time (no clock here).  Blocking (fsyncs).  Raises ValueError for a
        negative offset; KafkaApiError(KAFKA_STORAGE_ERROR) if the partition is offline or an
        I/O fails (which takes it offline).
        """
        if offset < 0:
            raise ValueError(f"{self.path}: cannot start at negative offset {offset}")
        self.health.check_online()
        try:
            with self._files_lock:
                self._start_at(offset)
        except (OSError, KafkaApiError) as exc:
            raise self._storage_failure(f"restarting the log at offset {offset}", exc) from None
        logger.info("%s: log emptied, restarting at offset %d", self.path, offset)

    def _start_at(self, offset: int) -> None:
        """Raises OSError."""
        # First, so a crash part way reopens at ``offset`` or with the old log, never mixed.
        checkpoints.write_log_start_offset(self.path, offset)
        created_ms = self.segments[-1].created_ms
        with self._lock:
            doomed, self.segments = self.segments, []
            self._unflushed_segments, self._unflushed_messages = [], 0
            self._truncations += 1
        for old in reversed(doomed):
            old.delete()
        segment = LogSegment.create(self.path, offset, now_ms=created_ms,
                                    index_interval=self.config.index_interval_bytes)
        checkpoints.fsync_directory(self.path)
        with self._lock:
            self.segments = [segment]
        self._moved_end(offset, (offset, offset, 0))
        self.log_start_offset = self.high_watermark = offset
        self._epochs.clear()
        self._producers.clear()
        self._checkpoint_truncation()

    def _moved_end(self, end: int, point: tuple[int, int, int]) -> None:
        """The log now ends, durably, at ``point`` = (``end``, segment base, file position)."""
        self.log_end_offset = end
        self.high_watermark = min(self.high_watermark, end)
        with self._lock:
            self._end_point = self._flushed_point = point
            self._truncations += 1

    def _checkpoint_truncation(self) -> None:
        """Rewrite the recovery point (and high watermark) at once: the old one may lie past
        the new end, where different batches will be written.  Raises OSError."""
        with self._checkpoint_lock:
            checkpoints.write_recovery_point(self.path, self._flushed_point)
            self._checkpointed_point = self._flushed_point
            if self._hw_unsaved():
                checkpoints.write_high_watermark(self.path, self.high_watermark)
                self._checkpointed_hw = self.high_watermark

    def _storage_failure(self, what: str, exc: Exception) -> KafkaApiError:
        """Take the partition offline after a failed disk operation; the error to raise."""
        why = exc.message if isinstance(exc, KafkaApiError) else str(exc)
        self.health.take_offline(f"{what} failed: {why}")
        return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.path}: {what} failed: {why}")
