"""The log of one partition: an ordered list of segments in one directory.

Directory layout::

    <topic>-<partition>/
        00000000000000000000.log / .index / .timeindex    one segment per base offset
                             (/ .txnindex / .txnsnapshot)  see kwire.log.segment
        00000000000000004096.log / ...                     the last one is the active segment
        leader-epoch-checkpoint                            see kwire.log.checkpoints
        log-start-offset-checkpoint                        written by DeleteRecords
        recovery-point-checkpoint                          written by flush and close
        high-watermark-checkpoint                          replicated mode, with the recovery point

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset``.
Single-node mode (the default): every append moves the high watermark to the
log end offset.  Replicated mode and the follower's operations (append as
fetched, truncation): kwire.log.replica.

Transactions (KIP-98; rules in kwire.log.producer_state): ``append`` tracks
the transactions clients' transactional batches open, ``append_control``
writes the coordinator's COMMIT/ABORT markers, ``last_stable_offset`` is
where read_committed consumers stop (<= high watermark) and
``aborted_transactions`` answers Fetch's aborted-transaction list from the
segments' ``.txnindex`` files.  Producer state (idempotence and open
transactions) is snapshotted whole into each new segment's ``.txnsnapshot``
when it is rolled, dropping producers idle past ``producer.id.expiration.ms``;
on open and after a truncation it is rebuilt from the newest usable snapshot
and the batch headers after it (kwire.log.producer_snapshots).

Everything here is synchronous and takes time as ``now_ms``.  ``append`` and
``read`` only write to / read from the page cache; ``flush``, ``close``,
``scrub``, ``delete_records`` (checkpoint fsync) and ``open`` with recovery
block on the disk and belong in a worker thread.  ``flush`` and ``scrub`` may
run in a worker thread concurrently with ``append`` and ``read`` on the owner
thread.

Storage failures (see kwire.log.health): an append is all-or-nothing, a
failed one answers KAFKA_STORAGE_ERROR and changes nothing; what cannot be
undone, corruption found on the read path (CRC of the batches a fetch reads
anyway) or by ``scrub`` (every closed segment, once after start), a failed
fsync and a malformed checkpoint take this partition offline.

Recovery point: ``flush`` records the offset/position it made durable and
``close`` (and a timed ``flush`` at most every ``RECOVERY_POINT_INTERVAL_MS``)
writes it to ``recovery-point-checkpoint``; an unclean start checks batches
only after it (kwire.log.recovery).

``PartitionLog`` opens, appends and reads here; its other roles are mixins in
sibling modules sharing its state: replication and follower truncation
(kwire.log.replica), transaction and producer queries (kwire.log.transactions),
flush, checkpoints, close and scrub (kwire.log.durability), and DeleteRecords,
retention and the cleaner's swap (kwire.log.trimming).
"""
from __future__ import annotations

import logging
import os
import threading

from kwire.codecs import records
from kwire.codecs.errors import ErrorCode, KafkaApiError

from . import checkpoints, cleaner, producer_snapshots, recovery
from .config import LogConfig
from .durability import RECOVERY_POINT_INTERVAL_MS, DurableLog  # noqa: F401  (re-exported)
from .health import StorageHealth
from .producer_snapshots import PRODUCER_STATE_SEGMENTS  # noqa: F401  (re-exported)
from .producer_state import PendingAppend, ProducerStateManager
from .replica import AppendResult, ReplicaLog
from .segment import CorruptSegment, LogSegment, UndoFailed, bisect_segments
from .slices import RecordSlices
from .transactions import TransactionalLog
from .trimming import TrimmingLog

logger = logging.getLogger(__name__)


INT32_MAX = 2**31 - 1



class PartitionLog(ReplicaLog, TransactionalLog, DurableLog, TrimmingLog):
    """Append, read, search and trim the log of one partition."""

    absent = False          # held here (kwire.log.manager.AbsentReplica: not)

    def __init__(self, path: str, config: LogConfig):
        self.path = path
        self.config = config
        self.segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.replicated = False               # see enable_replication (kwire.log.replica)
        self._checkpointed_hw: int | None = None
        self._epochs = checkpoints.LeaderEpochCache(path)
        self.leader_epoch = 0
        self.health = StorageHealth(path)
        self._producers = ProducerStateManager()
        self._lock = threading.Lock()         # counters shared with flush() in a worker thread
        self._unflushed_messages = 0
        self._unflushed_segments: list[LogSegment] = []
        self._last_flush_ms = 0
        # (offset, segment base, file position) after the last append; flush makes it durable
        self._end_point = (0, 0, 0)
        self._flushed_point: tuple[int, int, int] | None = None
        self._checkpointed_point: tuple[int, int, int] | None = None
        self._last_checkpoint_ms = 0
        self._checkpoint_lock = threading.Lock()
        self._truncations = 0                 # changes when a truncation moves the end back
        self._files_lock = threading.Lock()   # truncation vs. scrub: files changing size

    @property
    def offline(self) -> bool:
        """True once a storage failure took this partition offline (see kwire.log.health)."""
        return self.health.offline

    def __repr__(self) -> str:
        return (f"PartitionLog({self.path!r}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset})")

    # -- opening ----------------------------------------------------------

    @classmethod
    def open(cls, path: str, config: LogConfig, *, now_ms: int, recover: bool) -> PartitionLog:
        """Open (creating the directory if missing).

        With ``recover`` (no clean-shutdown marker), batches after the
        recovery point are checked and the log cut at the first torn or
        corrupt one (kwire.log.recovery); otherwise only index files and the
        headers after the active segment's last index entry are read.  Never
        raises for damaged files: a malformed checkpoint (logged at ERROR) or
        an I/O failure returns the log offline.
        """
        log = cls(path, config)
        log._last_flush_ms = log._last_checkpoint_ms = now_ms
        try:
            os.makedirs(path, exist_ok=True)
            log._load(now_ms, recover)
        except checkpoints.CheckpointError as exc:
            log.health.take_offline(f"{exc}; repair or remove it (a missing checkpoint is "
                                    "treated as never written)")
        except (OSError, KafkaApiError) as exc:
            log.health.take_offline(f"could not open: {exc}")
        return log

    def _load(self, now_ms: int, recover: bool) -> None:
        """Raises CheckpointError, OSError, KafkaApiError."""
        path, config = self.path, self.config
        start = checkpoints.read_log_start_offset(path)
        self._checkpointed_hw = checkpoints.read_high_watermark(path)
        self._epochs.load()
        cleaner.complete_swaps(path)          # a clean interrupted by a crash
        bases = recovery.segment_bases(path)
        if not bases:
            self.segments = [LogSegment.create(path, start or 0, now_ms=now_ms,
                                               index_interval=config.index_interval_bytes)]
        elif recover:
            point = checkpoints.read_recovery_point(path)
            self.segments = recovery.open_recovering(path, config, bases, now_ms, point)
        else:
            self.segments = recovery.open_clean(path, config, bases, now_ms)
        active = self.segments[-1]
        self.log_end_offset = self.high_watermark = active.next_offset
        self._end_point = (active.next_offset, active.base_offset, active.size)
        first = self.segments[0].base_offset
        self.log_start_offset = min(max(start or first, first), self.log_end_offset)
        # + 1: an epoch starting at the log end is kept (a leader that has not appended yet)
        self._epochs.truncate_from_end(self.log_end_offset + 1)
        self.leader_epoch = self._epochs.latest_epoch or 0
        self._rebuild_producer_state(now_ms)

    def _rebuild_producer_state(self, now_ms: int | None = None) -> None:
        """Rebuild producer state from the newest usable snapshot (kwire.log.producer_snapshots);
        with ``now_ms`` expired producers are dropped.  Blocking.  Raises OSError (a
        transaction index could not be written)."""
        producer_snapshots.rebuild(self.path, self.segments, self._producers, now_ms=now_ms,
                                   expiration_ms=self.config.producer_id_expiration_ms)

    # -- appending --------------------------------------------------------

    def append(self, records_data: bytes, *, now_ms: int,
               produce_version: int = records.LATEST_PRODUCE_VERSION, coordinator: bool = False,
               built_here: bool = False) -> AppendResult:
        """Validate, assign offsets and append the record batches of one Produce partition.

        ``built_here``: batches this broker built itself (a coordinator's records), checked
        only against the topic's limits (``records.own_batch_headers``), not record by record.

        Raises KafkaApiError: CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP,
        MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE (from
        ``validate_produce_records``, whose RecordValidationError carries
        ``record_errors``), INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER (idempotence), INVALID_TXN_STATE (a
        non-transactional batch from a producer with an open transaction),
        KAFKA_STORAGE_ERROR (write failed; nothing was appended, or the
        partition is offline).  Never fsyncs.
        """
        self.health.check_online()
        if built_here:
            headers = records.own_batch_headers(records_data, self.config.max_message_bytes)
        else:
            headers = records.validate_produce_records(
                records_data, self.config.max_message_bytes, produce_version=produce_version,
                rules=records.RecordRules.for_topic(
                    self.config.cleanup_policy, self.config.message_timestamp_type,
                    self.config.message_timestamp_before_max_ms,
                    self.config.message_timestamp_after_max_ms), now_ms=now_ms)
        append_time = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        duplicate, pending = self._producers.check(headers, self.log_end_offset, f"{self.path}: ",
                                                   coordinator=coordinator, append_time=append_time)
        if duplicate is not None:
            return AppendResult(duplicate.first_offset, duplicate.last_offset, -1,
                                self.log_start_offset, True,
                                duplicate.last_offset - duplicate.first_offset + 1, False)
        base, size = self.log_end_offset, len(records_data)
        parts = records.stamp_batches(records_data, headers, base, self.leader_epoch, append_time)
        count, needs_flush = self._write(parts, size, headers, now_ms, pending)
        self._leader_appended()
        return AppendResult(base, self.log_end_offset - 1, append_time, self.log_start_offset,
                            False, count, needs_flush, size)

    def append_control(self, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, *, now_ms: int) -> AppendResult:
        """Append an end-transaction marker (COMMIT or ABORT) for ``producer_id`` at the log
        end, as the leader does for the transaction coordinator's WriteTxnMarkers.

        The marker is a control batch stamped like any append (offset, leader
        epoch; LogAppendTime topics get ``now_ms`` as their timestamp type
        says).  It ends the producer's open transaction here, if any (an
        ABORT goes into the transaction index); a marker for a producer with
        no open transaction is appended all the same (markers are retried).
        Raises KafkaApiError: INVALID_PRODUCER_EPOCH (older than the
        producer's epoch), TRANSACTION_COORDINATOR_FENCED (older coordinator
        epoch than the last marker's), KAFKA_STORAGE_ERROR (write failed;
        nothing appended, or the partition is offline).  Never fsyncs.
        """
        self.health.check_online()
        base = self.log_end_offset
        pending = self._producers.check_marker(producer_id, producer_epoch, commit,
                                               coordinator_epoch, base, f"{self.path}: ",
                                               timestamp=now_ms)
        data = records.build_control_batch(producer_id, producer_epoch, commit,
                                           coordinator_epoch, now_ms)
        headers = [records.read_header(data)]
        append_time = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        parts = records.stamp_batches(data, headers, base, self.leader_epoch, append_time)
        count, needs_flush = self._write(parts, len(data), headers, now_ms, pending)
        self._leader_appended()
        return AppendResult(base, base, append_time, self.log_start_offset, False, count,
                            needs_flush, len(data))

    def _leader_appended(self) -> None:
        """Single-node mode: what is appended is committed (the high watermark moves)."""
        if not self.replicated:
            self.high_watermark = self.log_end_offset
            self._producers.on_high_watermark(self.high_watermark)

    def _write(self, parts: list, size: int, headers, now_ms: int,
               pending: PendingAppend) -> tuple[int, bool]:
        """Roll if due, append ``parts`` (``size`` bytes of stamped, checked batches described by
        ``headers``, with the transaction index entries of ``pending``), move the log end
        offset, not the high watermark, and commit ``pending`` to the producer state;
        all-or-nothing.  Returns (record count, needs_flush).  Raises
        KafkaApiError(KAFKA_STORAGE_ERROR)."""
        offset = headers[-1].next_offset
        max_timestamp = max(header.max_timestamp for header in headers)
        try:
            segment = self._maybe_roll(size, offset - 1, max_timestamp, now_ms)
            segment.append(parts, headers, pending.aborted)
        except UndoFailed as exc:
            self.health.take_offline(exc.message)
            raise
        except KafkaApiError as exc:
            self.health.write_failed(exc.message, now_ms)
            raise
        self.health.write_succeeded()
        self._producers.commit(pending)
        segment.write_behind(self.config.writeback_interval_bytes, self.config.page_cache_keep_bytes)
        self.log_end_offset = offset
        self._end_point = (offset, segment.base_offset, segment.size)
        count = sum(header.record_count for header in headers)
        with self._lock:
            self._unflushed_messages += count
            return count, self._unflushed_messages >= self.config.flush_interval_messages

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
                or waited > self.config.roll_ms
                or last_offset - active.base_offset > INT32_MAX):
            return self._roll(now_ms)
        return active

    def _roll(self, now_ms: int) -> LogSegment:
        """Seal the active segment and start a new one, with the snapshot of the producer state
        at its start, expired producers dropped first.  Raises KafkaApiError(KAFKA_STORAGE_ERROR)
        (the log is unchanged but for a valid final time-index entry and expired producers)."""
        old = self.segments[-1]
        try:
            old.seal()
            new = LogSegment.create(self.path, self.log_end_offset, now_ms=now_ms,
                                    index_interval=self.config.index_interval_bytes)
            self._producers.remove_expired(now_ms, self.config.producer_id_expiration_ms)
            new.write_snapshot(self._producers.snapshot())
        except OSError as exc:
            LogSegment(self.path, self.log_end_offset, created_ms=now_ms).delete()
            raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR,
                                f"{self.path}: rolling a new segment at offset "
                                f"{self.log_end_offset} failed: {exc}") from None
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
        KAFKA_STORAGE_ERROR if the partition is offline or stored bytes are
        found damaged (which takes it offline; the message names file and position).
        """
        return self.read_slices(offset, max_bytes, min_one_batch=min_one_batch,
                                max_offset=max_offset).to_bytes()

    def read_slices(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
                    max_offset: int | None = None) -> RecordSlices:
        """Where the batches ``read`` would return lie, not yet copied (kwire.log.slices).

        The CRC of every batch returned is checked when its bytes were read
        anyway while walking headers (batches up to 16 KiB).  Raises KafkaApiError
        as ``read`` does.
        """
        self.health.check_online()
        self._check_offset(offset)
        limit = self.high_watermark if max_offset is None else max_offset
        if offset >= limit:
            return RecordSlices()
        try:
            return RecordSlices(self._extents(offset, max_bytes, min_one_batch, limit))
        except (CorruptSegment, OSError) as exc:
            raise self._damaged(exc) from None

    def _damaged(self, exc: Exception) -> KafkaApiError:
        """Take the partition offline for damage found while reading; the error to raise."""
        why = exc.message if isinstance(exc, KafkaApiError) else f"read failed: {exc}"
        self.health.take_offline(f"corrupt or unreadable data: {why}")
        return KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.path} is offline: {why}")

    def _extents(self, offset: int, max_bytes: int, min_one_batch: bool,
                 limit: int) -> list[tuple[LogSegment, int, int]]:
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
            for h in segment.iter_headers(position, verify=True):
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
        timestamp >= ``timestamp_ms``, or None.  Raises KafkaApiError(KAFKA_STORAGE_ERROR)."""
        self.health.check_online()
        try:
            for segment in self.segments:
                found = segment.find_timestamp(timestamp_ms, self.log_start_offset)
                if found is not None:
                    return found
        except (CorruptSegment, OSError) as exc:
            raise self._damaged(exc) from None
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp, or None.

        Raises KafkaApiError(KAFKA_STORAGE_ERROR)."""
        self.health.check_online()
        try:
            return self._max_timestamp()
        except (CorruptSegment, OSError) as exc:
            raise self._damaged(exc) from None

    def _max_timestamp(self) -> tuple[int, int] | None:
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

    # -- leader epochs ----------------------------------------------------

    def set_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Become leader in ``epoch`` from ``start_offset``; older epochs are ignored. Raises OSError."""
        if self._epochs.assign(epoch, start_offset):
            self.leader_epoch = epoch

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (leader_epoch, end_offset), (-1, -1) if unknown (Kafka's rules:
        kwire.log.checkpoints.LeaderEpochCache.end_offset_for).  A single-node log that never
        recorded an epoch answers its current epoch with the log end offset."""
        if not self.replicated and not self._epochs.entries and epoch == self.leader_epoch:
            return epoch, self.log_end_offset
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

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
