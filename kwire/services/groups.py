"""Runs the sans-I/O group coordinator inside the Trio server.

Handlers make one call per API (``await groups.join(request)``, ``sync``,
``heartbeat``, ``leave``, ``commit_offsets``, ...).  Each call reads the
clock, asks the coordinator, appends the ``Outcome``'s records to the
internal ``__consumer_offsets`` topic, wakes the parked JoinGroup/SyncGroup
requests it completed and, if the outcome's next timer is sooner, the timer
task; a JoinGroup or SyncGroup then waits on its own ticket, so other
connections are never blocked.  The topic is replayed into the coordinator at
start-up.
"""
from __future__ import annotations

import itertools
import logging

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups import (
    GroupConfig, GroupCoordinator, GroupDescription, JoinRequest, JoinResult, LeaveResult, OffsetCommit, Outcome,
    SyncRequest, SyncResult,
)

from kwire.groups.assignors import ASSIGNORS, assignor_names
from kwire.groups.results import (
    ConsumerGroupConfig, ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResult,
)
from kwire.groups.internal_topics import OFFSETS, OFFSETS_TOPIC
from kwire.groups.share_group_records import is_share_key

from kwire.runtime.blocking import run_blocking
from kwire.runtime.clock import Clock

logger = logging.getLogger("kwire.groups")



def records_to_end(plog):
    """Every (batch, record) of an internal topic's partition from its log start to its log
    end, not the high watermark: a new leader's high watermark may lag its log, every record
    of which the ISR keeps (Kafka's coordinators load the same way)."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20, max_offset=plog.log_end_offset)
        if not data:
            return
        records = MemoryRecords(data)
        while records.has_next():
            batch = records.next_batch()
            for record in batch:
                yield batch, record
            # the batch's end, not its last record's: the log cleaner may have emptied it
            offset = batch.base_offset + batch.last_offset_delta + 1


def consumer_group_config(config) -> ConsumerGroupConfig:
    """The ``group.consumer.*`` broker keys; assignor class names become short names, names
    kwire has no assignor for are left out (logged)."""
    assignors = tuple(a for a in assignor_names(config.value_of("group.consumer.assignors")) if a in ASSIGNORS)
    if len(assignors) != len(config.value_of("group.consumer.assignors")):
        logger.warning("group.consumer.assignors: kwire has only the assignors %s", sorted(ASSIGNORS))
    return ConsumerGroupConfig(
        session_timeout_ms=config.value_of("group.consumer.session.timeout.ms"),
        heartbeat_interval_ms=config.value_of("group.consumer.heartbeat.interval.ms"),
        max_size=config.value_of("group.consumer.max.size"),
        assignors=assignors or ("uniform", "range"),
        migration_policy=config.value_of("group.consumer.migration.policy").lower())


class _Waiter:
    __slots__ = ("done", "result", "group_id", "result_class")

    def __init__(self, group_id: str, result_class):
        self.done = trio.Event()
        self.result = None
        self.group_id = group_id
        self.result_class = result_class     # JoinResult or SyncResult, for NOT_COORDINATOR


class GroupService:
    """The group coordinator of one broker, given the broker's config, log manager and clock."""

    def __init__(self, config, logs, clock: Clock):
        self.config = config
        self.logs = logs
        self.clock = clock
        self.coordinator = GroupCoordinator(GroupConfig(
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            offsets_retention_ms=config.offsets_retention_ms,
            max_size=config.value_of("group.max.size"),
            consumer=consumer_group_config(config)))
        self._tickets = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._wakeup = trio.Event()
        self._timer_at: int | None = None   # the deadline the timer task sleeps until (None: no timer)
        # Cluster mode (kwire.cluster.node): the __consumer_offsets partitions this broker leads,
        # whose groups it coordinates; None on a single node, which coordinates every group.
        self.owned: set[int] | None = None
        # set by the broker when it is built, for its mode: leadership, acks=all and the read
        # fence of __consumer_offsets (kwire.services.partitions), its creation
        # (kwire.services.topic_admin)
        self.partitions = None
        self.topic_admin = None
        # share groups' records (KIP-932) are replayed by the share coordinator:
        # (key, value, now_ms) -> bool, set by ShareService.attach_groups
        self.share_replay = None

    # -- cluster mode: coordination follows the offsets partitions' leadership -------------
    def check_owner(self, group_id: str) -> None:
        """Raises KafkaApiError(NOT_COORDINATOR) when another broker coordinates ``group_id``."""
        if self.owned is None:
            return
        topic = self.logs.get(OFFSETS_TOPIC)
        if topic is None or self.coordinator.partition_for(group_id, len(topic.partitions)) not in self.owned:
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR, f"this broker does not coordinate group {group_id}")

    def follow_leadership(self, led: set[int]) -> None:
        """Load the groups of newly led offsets partitions (replaying them) and drop the groups
        of partitions led elsewhere now."""
        owned = self.owned or set()
        topic = self.logs.get(OFFSETS_TOPIC)
        n = len(topic.partitions) if topic else 1
        lost = owned - led
        if lost:
            moved = lambda g: self.coordinator.partition_for(g, n) in lost  # noqa: E731
            dropped = self.coordinator.unload_groups(moved)
            logger.info("unloaded %d group(s) of %s partitions %s", dropped, OFFSETS_TOPIC, sorted(lost))
            for waiter in self._waiting.values():     # a parked JoinGroup/SyncGroup: find the new one
                if moved(waiter.group_id) and not waiter.done.is_set():
                    waiter.result = waiter.result_class(ErrorCode.NOT_COORDINATOR)
                    waiter.done.set()
        gained = led - owned
        self.owned = set(led)
        if gained and topic is not None:
            self.replay([topic.partitions[p] for p in sorted(gained)])
            self._wakeup.set()

    # -- one call per API ---------------------------------------------------------
    async def join(self, request: JoinRequest) -> JoinResult:
        """JoinGroup; returns when this member's join phase ends.  Cancel-safe (the answer is dropped)."""
        self.check_owner(request.group_id)
        return await self._parked(request.group_id, JoinResult,
                                  lambda ticket, now: self.coordinator.join_group(ticket, request, now,
                                                                                 self.topic_metadata()))

    async def sync(self, request: SyncRequest) -> SyncResult:
        """SyncGroup; a follower returns when the leader has synced.  Cancel-safe (the answer is dropped)."""
        self.check_owner(request.group_id)
        return await self._parked(request.group_id, SyncResult,
                                  lambda ticket, now: self.coordinator.sync_group(ticket, request, now))

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None) -> ErrorCode:
        self.check_owner(group_id)
        return await self._call(lambda now: self.coordinator.heartbeat(
            group_id, generation_id, member_id, group_instance_id, now))

    async def leave(self, group_id: str, members: list[tuple[str | None, str | None, str | None]]) -> LeaveResult:
        """LeaveGroup of (member_id, group_instance_id, reason) entries."""
        self.check_owner(group_id)
        return await self._call(lambda now: self.coordinator.leave_group(group_id, members, now))

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None, offsets: list[OffsetCommit], *,
                             api_version: int | None = None) -> list[ErrorCode]:
        self.check_owner(group_id)
        return await self._call(lambda now: self.coordinator.commit_offsets(
            group_id, generation_id, member_id, group_instance_id, offsets, now, api_version=api_version))

    async def delete_groups(self, group_ids: list[str]) -> list[ErrorCode]:
        for group_id in group_ids:
            self.check_owner(group_id)
        return await self._call(lambda now: self.coordinator.delete_groups(group_ids, now))

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                             ) -> tuple[ErrorCode, list[ErrorCode]]:
        self.check_owner(group_id)
        return await self._call(lambda now: self.coordinator.delete_offsets(group_id, partitions, now))

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                                 member_id: str, group_instance_id: str | None,
                                 offsets: list[OffsetCommit]) -> list[ErrorCode]:
        """TxnOffsetCommit: written now in a transactional batch, counted at the COMMIT marker.
        Raises KafkaApiError when the batch could not be appended; the producer's pending offsets
        of the group are dropped then (a later COMMIT of the same producer id must not install
        offsets that were never written)."""
        self.check_owner(group_id)
        try:
            return await self._call(lambda now: self.coordinator.txn_commit_offsets(
                group_id, producer_id, producer_epoch, generation_id, member_id, group_instance_id, offsets, now))
        except KafkaApiError:
            self.coordinator.discard_txn_offsets(group_id, producer_id)
            raise

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker of ``producer_id`` was appended to offsets partition ``partition``."""
        topic = self.logs.get(OFFSETS_TOPIC)
        n = len(topic.partitions) if topic else 1
        self.coordinator.complete_txn(producer_id, commit,
                                      lambda g: self.coordinator.partition_for(g, n) == partition,
                                      self.clock.now_ms())

    def partition_of(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id`` (the topic exists: ``offsets_topic``)."""
        return self.coordinator.partition_for(group_id, len(self.logs.get(OFFSETS_TOPIC).partitions))

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None,
                      require_stable: bool = False) -> list[tuple]:
        self.check_owner(group_id)
        return self.coordinator.fetch_offsets(group_id, partitions, require_stable)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        self.check_owner(group_id)
        return self.coordinator.validate_offset_fetch(group_id, member_id, member_epoch)

    def describe(self, group_id: str) -> GroupDescription:
        self.check_owner(group_id)
        return self.coordinator.describe_group(group_id)

    def list_groups(self, states_filter: list[str] | None) -> list[tuple[str, str, str]]:
        return self.coordinator.list_groups(states_filter)

    def list_consumer_groups(self, states_filter: list[str] | None) -> list[tuple[str, str]]:
        return self.coordinator.list_consumer_groups(states_filter)

    # -- KIP-848 consumer groups ------------------------------------------------------
    def topic_metadata(self) -> dict:
        """name -> (topic id, partitions) of every topic but the internal ones: what
        consumer-group subscriptions (names and regexes) resolve against."""
        return {name: (t.topic_id, len(t.partitions)) for name, t in self.logs.topics.items()
                if not t.internal and not name.startswith("__")}

    async def consumer_heartbeat(self, request: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat.  Raises KafkaApiError(NOT_COORDINATOR) for another broker's group."""
        self.check_owner(request.group_id)
        return await self._call(lambda now: self.coordinator.consumer_group_heartbeat(
            request, self.topic_metadata(), now))

    def is_consumer_group(self, group_id: str) -> bool:
        return self.coordinator.is_consumer_group(group_id)

    def consumer_describe(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe of one group.  Raises KafkaApiError(NOT_COORDINATOR)."""
        self.check_owner(group_id)
        return self.coordinator.consumer_group_describe(group_id)

    async def _call(self, call):
        """Run one coordinator call at the current time, apply its outcome, return its result.
        Raises KafkaApiError(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) when the records it
        wrote did not reach the in-sync replicas (Kafka's mapping of the append's error): the
        client retries instead of taking an offset commit for done that a failover may lose."""
        await self.offsets_topic()  # first, so a call and the append of its records are one step
        outcome = call(self.clock.now_ms())
        code = await self.apply(outcome)
        if code != ErrorCode.NONE:
            moved = code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR)
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR if moved else ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                f"the group's records were not replicated: {code.name}")
        return outcome.result

    async def confirm_owner(self, group_id: str) -> None:
        """Before serving committed offsets in a cluster: check with ZooKeeper that this broker
        still leads the group's ``__consumer_offsets`` partition.  A leader paused past its
        session (SIGSTOP, a long GC) wakes up still believing it coordinates the group and would
        answer offsets older than those its successor has since committed.  Raises
        KafkaApiError(NOT_COORDINATOR)."""
        self.check_owner(group_id)
        await self.partitions.confirm_leadership((OFFSETS_TOPIC, self.partition_of(group_id)))

    async def _parked(self, group_id: str, result_class, call):
        """Like ``_call`` for a call that answers by ticket; waits for that answer (or
        ``result_class(NOT_COORDINATOR)`` when the group moves to another broker meanwhile)."""
        ticket = next(self._tickets)
        waiter = self._waiting[ticket] = _Waiter(group_id, result_class)
        try:
            await self._call(lambda now: call(ticket, now))
            await waiter.done.wait()
            return waiter.result
        finally:
            del self._waiting[ticket]

    # -- the internal topic ---------------------------------------------------
    async def offsets_topic(self):
        """The ``__consumer_offsets`` topic, created on first use (compacted, never time-deleted)."""
        topic = self.logs.get(OFFSETS_TOPIC)
        if topic is None:           # a cluster's through ZooKeeper: COORDINATOR_NOT_AVAILABLE until here
            topic = await self.topic_admin.internal_topic(OFFSETS)
        return topic

    def replay(self, partitions=None) -> int:
        """Feed every record of ``__consumer_offsets`` (or of ``partitions``, its logs) to the
        coordinator, to the log end (``records_to_end``); returns the count."""
        topic = self.logs.get(OFFSETS_TOPIC)
        if topic is None:
            return 0
        topic.internal = True
        count = 0
        n = len(topic.partitions)
        now_ms = self.clock.now_ms()            # replayed share members' sessions start now
        for index, plog in enumerate(topic.partitions) if partitions is None else (
                (topic.partitions.index(p), p) for p in partitions):
            here = lambda g, index=index: self.coordinator.partition_for(g, n) == index  # noqa: E731
            for batch, record in records_to_end(plog):
                if batch.is_control_batch:          # a transaction's marker: its offsets count or vanish
                    commit = record.key is not None and len(record.key) >= 4 and record.key[3] == 1
                    self.coordinator.replay_marker(batch.producer_id, commit, here)
                elif self.share_replay is not None and is_share_key(record.key):
                    self.share_replay(record.key, record.value, now_ms)
                    count += 1
                else:
                    self.coordinator.replay(record.key, record.value,
                                            batch.producer_id if batch.is_transactional else None)
                    count += 1
        if count:
            logger.info("replayed %d group record(s) from %s", count, OFFSETS_TOPIC)
        return count

    def append_records(self, records: list[tuple[str, bytes, bytes | None]], replicate: list | None = None) -> list:
        """Append (group_id, key, value) records to the group's partition of the internal topic
        (created by ``_call`` before any coordinator call); returns the logs to flush."""
        if not records:
            return []
        topic = self.logs.get(OFFSETS_TOPIC)
        flushes = []
        by_partition: dict[int, list] = {}
        for group_id, key, value, producer in records:
            # one batch per partition and producer: transactional offsets go in the producer's batch
            p = self.coordinator.partition_for(group_id, len(topic.partitions))
            by_partition.setdefault((p, producer), []).append((key, value))
        ts = self.clock.now_ms()
        for (p, producer), items in by_partition.items():
            producer_id, producer_epoch = producer or (-1, -1)
            # as Kafka's group coordinator: a transactional batch of the producer at sequence 0,
            # appended without the producer's sequence checks (coordinator=True)
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=producer is not None,
                                                producer_id=producer_id, producer_epoch=producer_epoch,
                                                base_sequence=-1 if producer is None else 0,
                                                batch_size=2**31 - 1)
            for i, (key, value) in enumerate(items):
                builder.append(i, timestamp=ts, key=key, value=value, headers=[])
            plog = topic.partitions[p]
            if plog.absent:            # its replica left this broker (kwire.cluster.reassignment)
                raise KafkaApiError(ErrorCode.NOT_COORDINATOR, f"{OFFSETS_TOPIC}-{p} is not on this broker")
            result = plog.append(bytes(builder.build()), now_ms=ts, coordinator=producer is not None,
                                 built_here=True)
            if result.needs_flush:
                flushes.append(plog)
            required = self.partitions.coordinator_appended((OFFSETS_TOPIC, p), result)
            if required is not None:         # replicated: answered once the high watermark is there
                replicate.append(((OFFSETS_TOPIC, p), required))
        return flushes

    # -- outcomes and timers -------------------------------------------------------
    async def apply(self, outcome: Outcome) -> ErrorCode:
        """Persist an outcome's records, then complete its parked requests and move the timer.
        Returns NONE, or the error of a write that did not reach the in-sync replicas within
        offsets.commit.timeout.ms (5 s, Kafka's default)."""
        replicate: list = []
        worst = ErrorCode.NONE
        for plog in self.append_records(outcome.records, replicate):
            await run_blocking(plog.flush)
        for tp, required in replicate:      # as Kafka: group records are written with acks=all
            code = await self.partitions.wait_committed(tp, required, trio.current_time() + 5)
            if code != ErrorCode.NONE:
                logger.warning("%s-%d: group records up to offset %d not replicated: %s", tp[0], tp[1],
                               required - 1, code.name)
                worst = code
        for ticket, result in outcome.completed:
            waiter = self._waiting.get(ticket)
            if waiter is not None and not waiter.done.is_set():
                waiter.result = result
                waiter.done.set()
        at = outcome.next_deadline_ms
        if at is not None and (self._timer_at is None or at < self._timer_at):
            self._wakeup.set()
        return worst

    async def run_timers(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Call the coordinator's tick when its next deadline passes (sooner if a call moves it earlier)."""
        task_status.started()
        while True:
            self._timer_at = self.coordinator.next_deadline_ms()
            self._wakeup = trio.Event()
            if self._timer_at is None:
                await self._wakeup.wait()
            else:
                with trio.move_on_after(max(0.0, (self._timer_at - self.clock.now_ms()) / 1000)):
                    await self._wakeup.wait()
            await self.apply(self.coordinator.tick(self.clock.now_ms()))
