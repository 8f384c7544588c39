"""Runs the sans-I/O transaction coordinator (kwire.groups.txn_coordinator) inside the Trio server.

Handlers make one call per API (``init_producer_id``, ``add_partitions``,
``add_offsets``, ``end_txn``).  Each call asks the coordinator, then drives the
result as its docstring says: the state record is appended to
``__transaction_state`` (and flushed when the topic's flush policy says so)
before the client is answered; when a transaction is decided, its COMMIT or
ABORT markers are appended to every partition it touched, including the
``__consumer_offsets`` partition of each group it committed offsets for (whose
pending offsets then count or vanish), then the Complete record is written.
Markers are written before the decision's request is answered, so a
read_committed consumer sees a committed transaction as soon as EndTxn
returns; a marker that cannot be written now (an offline partition) is
retried in the background while the id answers CONCURRENT_TRANSACTIONS.

Timeouts: a task sleeps until the coordinator's next deadline and aborts the
transactions open longer than their timeout (fencing their producers) and
forgets ids idle for ``transactional.id.expiration.ms``.

Start-up: ``__transaction_state`` is replayed; a transaction found decided but
not completed (a crash between the decision and its Complete record) has its
markers written again, which is harmless as markers are idempotent; one found
open is aborted when its timeout passes.

Single node only: in a ZooKeeper cluster transactional ids are still refused.
"""
from __future__ import annotations

import logging

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.txn_coordinator import (
    TRANSACTION_STATE_TOPIC, TransactionCoordinator, TxnConfig, TxnMarkers, TxnResult,
)

from .blocking import create_topic, next_producer_id, run_blocking
from .clock import Clock
from .group_service import OFFSETS_TOPIC, GroupService

logger = logging.getLogger("kwire.transactions")

MARKER_RETRY_S = 1.0
# A stale marker (its producer or coordinator epoch moved on) is one nobody needs any more.
STALE_MARKER = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}


class TransactionService:
    """The transaction coordinator of one single-node broker."""

    def __init__(self, config, logs, clock: Clock, groups: GroupService, notify_appended):
        self.config = config
        self.logs = logs
        self.clock = clock
        self.groups = groups
        self.notify_appended = notify_appended
        self._reserved: int | None = None
        self.coordinator = TransactionCoordinator(self._take_producer_id, TxnConfig(
            transaction_max_timeout_ms=config.value_of("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=config.value_of("transactional.id.expiration.ms"),
            num_partitions=config.value_of("transaction.state.log.num.partitions")))
        self._wakeup = trio.Event()
        self._pending: list[TxnMarkers] = []       # decided at start-up, or markers to retry
        self._lock = trio.Lock()                   # one request's writes at a time, in order

    # -- the internal topic ---------------------------------------------------
    async def state_topic(self):
        """``__transaction_state``, created (compacted, empty partitions loaded) on first use."""
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            topic = await create_topic(
                self.logs, TRANSACTION_STATE_TOPIC, self.coordinator.config.num_partitions,
                {"cleanup.policy": "compact",
                 "segment.bytes": str(self.config.value_of("transaction.state.log.segment.bytes")),
                 "min.insync.replicas": str(self.config.value_of("transaction.state.log.min.isr"))},
                now_ms=self.clock.now_ms(), internal=True, exist_ok=True)
        if not self.coordinator.owned_partitions():
            self.load()
        return topic

    def load(self) -> int:
        """Replay every partition of ``__transaction_state`` (to the log end); the transactions
        found decided but not completed are queued for the timer task.  Returns the record count."""
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return 0
        topic.internal = True
        count = 0
        for index, plog in enumerate(topic.partitions):
            self.coordinator.begin_load(index, plog.leader_epoch)
            offset = plog.log_start_offset
            while offset < plog.log_end_offset:
                data = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset)
                if not data:
                    break
                records = MemoryRecords(data)
                while records.has_next():
                    batch = records.next_batch()
                    for record in batch:
                        if not batch.is_control_batch:
                            self.coordinator.replay(record.key, record.value)
                            count += 1
                        offset = record.offset + 1
            self._pending.extend(self.coordinator.finish_load(index))
        if count:
            logger.info("replayed %d transaction record(s) from %s; %d transaction(s) to complete",
                        count, TRANSACTION_STATE_TOPIC, len(self._pending))
        if self._pending:
            self._wakeup.set()
        return count

    # -- one call per API ---------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> TxnResult:
        await self.state_topic()
        self._reserved = await next_producer_id(self.logs)   # taken only for a new id (or a rotation)
        return await self._run(lambda now: self.coordinator.init_producer_id(
            transactional_id, timeout_ms, producer_id, producer_epoch, now_ms=now))

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions) -> TxnResult:
        await self.state_topic()
        return await self._run(lambda now: self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, now))

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> TxnResult:
        await self.state_topic()
        await self.groups.offsets_topic()
        partition = self.groups.partition_of(group_id)
        return await self._run(lambda now: self.coordinator.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id, partition, now))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> TxnResult:
        await self.state_topic()
        return await self._run(lambda now: self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, commit, now))

    def _take_producer_id(self) -> int:
        if self._reserved is None:
            raise KafkaApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "no producer id reserved")
        producer_id, self._reserved = self._reserved, None
        return producer_id

    # -- driving results -------------------------------------------------------------
    async def _run(self, call) -> TxnResult:
        async with self._lock:
            answer = await self._drive(call(self.clock.now_ms()))
        self._wakeup.set()          # a new transaction may have an earlier timeout
        return answer

    async def _drive(self, result: TxnResult) -> TxnResult:
        """Append the result's state records, then write its markers and the Complete record;
        returns the result that answers the client (the one before the markers)."""
        result = await self._write_state(result)
        answer = result
        while result.markers is not None:
            markers = result.markers
            if not await self._write_markers(markers):
                self._pending.append(markers)      # retried by the timer task
                break
            result = await self._write_state(self.coordinator.markers_written(markers, self.clock.now_ms()))
        return answer

    async def _write_state(self, result: TxnResult) -> TxnResult:
        while result.write is not None:
            if result.backoff_ms:
                await trio.sleep(result.backoff_ms / 1000)
            write = result.write
            result = self.coordinator.write_done(write, await self._append_state(write), self.clock.now_ms())
        return result

    async def _append_state(self, write) -> ErrorCode:
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        if topic is None or write.partition >= len(topic.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        plog = topic.partitions[write.partition]
        now = self.clock.now_ms()
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
        builder.append(0, timestamp=now, key=write.key, value=write.value, headers=[])
        try:
            result = plog.append(bytes(builder.build()), now_ms=now)
            if result.needs_flush:
                await run_blocking(plog.flush)
        except KafkaApiError as exc:
            logger.warning("%s-%d: transaction record not written: %s", TRANSACTION_STATE_TOPIC,
                           write.partition, exc.message)
            return exc.code
        return ErrorCode.NONE

    async def _write_markers(self, markers: TxnMarkers) -> bool:
        """Append the markers to every partition of the transaction; False if one could not be
        written (the others stay written: markers are idempotent)."""
        now = self.clock.now_ms()
        written, flushes, complete = [], [], True
        for topic, partition in markers.partitions:
            plog = self.logs.partition(topic, partition)
            if plog is None:
                continue                                  # a deleted topic: as Kafka, skipped
            try:
                result = plog.append_control(markers.producer_id, markers.producer_epoch, markers.commit,
                                             markers.coordinator_epoch, now_ms=now)
            except KafkaApiError as exc:
                if exc.code in STALE_MARKER:
                    logger.info("%s-%d: stale marker of producer %d skipped: %s", topic, partition,
                                markers.producer_id, exc.message)
                    continue
                logger.warning("%s-%d: transaction marker not written: %s", topic, partition, exc.message)
                complete = False
                continue
            if result.needs_flush:
                flushes.append(plog)
            if topic == OFFSETS_TOPIC:
                self.groups.complete_txn(partition, markers.producer_id, markers.commit)
            written.append((topic, partition))
        self.notify_appended(written)          # read_committed fetches parked at the old LSO
        for plog in flushes:
            await run_blocking(plog.flush)
        return complete

    # -- timers -------------------------------------------------------------------
    async def run_timers(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Abort timed-out transactions, forget idle ids, finish what start-up or a failed
        marker left decided but not completed."""
        task_status.started()
        while True:
            self._wakeup = trio.Event()
            pending, self._pending = self._pending, []
            for markers in pending:
                async with self._lock:
                    if await self._write_markers(markers):
                        await self._write_state(self.coordinator.markers_written(markers, self.clock.now_ms()))
                    else:
                        self._pending.append(markers)
            async with self._lock:
                for result in self.coordinator.expired(self.clock.now_ms()):
                    await self._drive(result)
            at = self.coordinator.next_deadline_ms()
            wait_s = None if at is None else max(0.0, (at - self.clock.now_ms()) / 1000)
            if self._pending:
                wait_s = MARKER_RETRY_S if wait_s is None else min(wait_s, MARKER_RETRY_S)
            with trio.move_on_after(wait_s if wait_s is not None else float("inf")):
                await self._wakeup.wait()
