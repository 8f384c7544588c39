"""Runs the sans-I/O group coordinator inside the Trio server.

The coordinator returns records and completed (parked) responses; this
module appends the records to the internal ``__consumer_offsets`` topic,
wakes the parked JoinGroup/SyncGroup requests, drives the coordinator's
timers and replays the topic into it at start-up.  Parked requests wait on
their own ticket, so other connections are never blocked.
"""
from __future__ import annotations

import itertools
import logging

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kwire.groups.coordinator import GroupCoordinator
from kwire.groups.results import GroupConfig

from .broker import now_ms

logger = logging.getLogger("kwire.groups")

OFFSETS_TOPIC = "__consumer_offsets"


class GroupService:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.coordinator = GroupCoordinator(GroupConfig(
            initial_rebalance_delay_ms=cfg.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=cfg.group_min_session_timeout_ms,
            max_session_timeout_ms=cfg.group_max_session_timeout_ms,
            offsets_retention_ms=cfg.offsets_retention_ms))
        self._tickets = itertools.count(1)
        self._waiting: dict[int, list] = {}   # ticket -> [trio.Event, result]
        self._wakeup = trio.Event()

    # -- the internal topic ---------------------------------------------------
    def offsets_topic(self):
        """The ``__consumer_offsets`` topic, created on first use (compacted, never time-deleted)."""
        logs = self.broker.logs
        topic = logs.get(OFFSETS_TOPIC)
        if topic is None:
            topic = logs.create_topic(OFFSETS_TOPIC, self.broker.config.offsets_topic_num_partitions,
                                      {"cleanup.policy": "compact"}, now_ms=now_ms(), internal=True)
        return topic

    def replay(self) -> int:
        """Feed every record of ``__consumer_offsets`` to the coordinator; returns the count."""
        topic = self.broker.logs.get(OFFSETS_TOPIC)
        if topic is None:
            return 0
        topic.internal = True
        count = 0
        for plog in topic.partitions:
            offset = plog.log_start_offset
            while offset < plog.log_end_offset:
                data = plog.read(offset, 1 << 20)
                if not data:
                    break
                records = MemoryRecords(data)
                while records.has_next():
                    batch = records.next_batch()
                    for record in batch:
                        self.coordinator.replay(record.key, record.value)
                        count += 1
                        offset = record.offset + 1
        if count:
            logger.info("replayed %d group record(s) from %s", count, OFFSETS_TOPIC)
        return count

    def append_records(self, records: list[tuple[str, bytes, bytes | None]]) -> None:
        """Append (group_id, key, value) records to the group's partition of the internal topic."""
        if not records:
            return
        topic = self.offsets_topic()
        by_partition: dict[int, list] = {}
        for group_id, key, value in records:
            p = self.coordinator.partition_for(group_id, len(topic.partitions))
            by_partition.setdefault(p, []).append((key, value))
        ts = now_ms()
        for p, items in by_partition.items():
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                                producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                                batch_size=2**31 - 1)
            for i, (key, value) in enumerate(items):
                builder.append(i, timestamp=ts, key=key, value=value, headers=[])
            plog = topic.partitions[p]
            result = plog.append(bytes(builder.build()), now_ms=ts)
            if result.needs_flush:
                plog.flush()

    # -- outcomes, tickets, timers -----------------------------------------
    def apply(self, outcome) -> None:
        """Persist an outcome's records, then complete its parked requests."""
        self.append_records(outcome.records)
        for ticket, result in outcome.completed:
            waiter = self._waiting.get(ticket)
            if waiter is not None:
                waiter[1] = result
                waiter[0].set()
        self._wakeup.set()

    def new_ticket(self) -> int:
        ticket = next(self._tickets)
        self._waiting[ticket] = [trio.Event(), None]
        return ticket

    async def wait(self, ticket: int):
        """Wait for a parked request's result (returns at once if it is already complete)."""
        waiter = self._waiting[ticket]
        try:
            await waiter[0].wait()
            return waiter[1]
        finally:
            self._waiting.pop(ticket, None)

    async def run_timers(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Call the coordinator's tick when its next deadline passes (or when woken)."""
        task_status.started()
        while True:
            deadline = self.coordinator.next_deadline_ms()
            self._wakeup = trio.Event()
            if deadline is None:
                await self._wakeup.wait()
            else:
                delay = max(0.0, (deadline - now_ms()) / 1000)
                with trio.move_on_after(delay):
                    await self._wakeup.wait()
            self.apply(self.coordinator.tick(now_ms()))
