"""Runs the sans-I/O share-group coordinator (kwire.groups.share_coordinator) inside the Trio server.

Handlers make one call per API (``heartbeat``, ``fetch``, ``acknowledge``, ``describe``,
``delete_groups``).  The records of each outcome are appended to ``__share_group_state``
(and flushed when its flush policy says so) before the caller answers, so an
acknowledgement the client saw answered survives a kill -9; the topic is replayed at
start-up.  Acquisitions are not written (as in Kafka): after a crash, records that were
acquired and not acknowledged are delivered again.  The group's own records (its epoch,
members and assignments: ``ShareOutcome.group_records``) go to the group's
``__consumer_offsets`` partition through the GroupService, as its own records do, before
the answer; the GroupService replays them into the share coordinator with the rest of
that partition (``attach_groups``).

A timer task ticks the coordinator every ``TICK_S``: members past their session timeout
leave (their records are released) and acquisition locks past their deadline end.  Records
becoming available again, or new records appended, wake parked ShareFetch requests.

Share sessions (KIP-932): one per (group, member), keyed by its epoch: 0 opens (replacing
an older one), -1 closes (releasing the member's acquired records), any other must be the
next one expected (INVALID_SHARE_SESSION_EPOCH) of an existing session
(SHARE_SESSION_NOT_FOUND).

Where the share-partitions' state lives is ``states`` (``kwire.services.share_state.ShareStates``),
and where the groups' configs are kept is ``group_configs.store``, both chosen when the broker
is built (``attach_states``).  On a single node the coordinator's memory is the state and every
change is appended to ``__share_group_state`` (``LocalShareStates``).  In a cluster
(``kwire.cluster.share_states``) membership is served by the group coordinator (the leader of
the group's ``__consumer_offsets`` partition, NOT_COORDINATOR elsewhere); ShareFetch and
ShareAcknowledge of a partition by its leader (NOT_LEADER_OR_FOLLOWER elsewhere), the
share-partition leader, which loads a share-partition's state from its share coordinator on
first use and writes every change there before answering.  Share sessions are per broker (as
in Kafka); a share-partition leader that is not the group coordinator does not check
membership when a session opens, and the records of a member gone silent come back when its
acquisition locks expire.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.codecs.records import CONTROL_BIT, HEADER, HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL_BIT
from kwire.groups.coordinator import partition_for
from kwire.groups.internal_topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC
from kwire.groups.results import Outcome
from kwire.groups.share_coordinator import HeartbeatResult, ShareConfig, ShareCoordinator, Topic
from kwire.groups.share_partition import PartitionLimits

from kwire.runtime.clock import Clock
from kwire.services.groups import records_to_end
from kwire.services.group_configs import GroupConfigs, GroupConfigStore
from kwire.services.share_state import Key, ShareStates

logger = logging.getLogger("kwire.share")

TICK_S = 0.1
FINAL_EPOCH = -1
# Batches are read by header only, in codecs.records' v2 layout (HEADER): control batches
# (CONTROL_BIT) are transaction markers, TRANSACTIONAL_BIT marks a transactional batch.


def enabled(config) -> bool:
    """Whether this broker serves share groups (KIP-932)."""
    return (bool(config.value_of("group.share.enable"))
            and "share" in config.value_of("group.coordinator.rebalance.protocols"))


def batch_bounds(data: bytes) -> list[tuple[int, int, bool, int]]:
    """(base_offset, last_offset, is_control, end position) of each whole batch in ``data``."""
    out, pos = [], 0
    view = memoryview(data)
    while pos + HEADER_SIZE <= len(view):
        base, length, _epoch, _magic, _crc, attributes, last_delta, *_ = HEADER.unpack_from(view, pos)
        end = pos + LOG_OVERHEAD + length
        if end > len(view):
            break
        out.append((base, base + last_delta, bool(attributes & CONTROL_BIT), end))
        pos = end
    return out


def aborted_batches(data: bytes, bounds, aborted: list[tuple[int, int]]) -> set[int]:
    """Base offsets of the batches in ``data`` that belong to an aborted transaction
    (``aborted``: (producer_id, first_offset), as Fetch lists them), found as a read_committed
    client does: a producer's transactional batches from its first offset until its marker."""
    if not aborted:
        return set()
    pending = sorted(aborted, key=lambda a: a[1])
    open_aborted: set[int] = set()
    out = set()
    pos = 0
    for base, _last, control, end in bounds:
        while pending and pending[0][1] <= base:
            open_aborted.add(pending.pop(0)[0])
        header = HEADER.unpack_from(data, pos)
        attributes, producer_id = header[5], header[9]
        if producer_id in open_aborted and attributes & TRANSACTIONAL_BIT:
            if control:
                open_aborted.discard(producer_id)      # its ABORT marker ends the aborted range
            else:
                out.add(base)
        pos = end
    return out


@dataclass
class ShareSession:
    epoch: int                                   # the next epoch expected
    partitions: set = field(default_factory=set)  # (topic_id, partition)
    rotation: int = 0                            # where the next fetch starts among them


class ShareService:
    """The share-group coordinator of one broker, over the ``states`` its mode keeps."""

    def __init__(self, config, logs, clock: Clock, notify_changed=None):
        self.config = config
        self.logs = logs
        self.clock = clock
        v = config.value_of
        self.lock_duration_ms = v("group.share.record.lock.duration.ms")
        self.coordinator = ShareCoordinator(ShareConfig(
            session_timeout_ms=v("group.share.session.timeout.ms"),
            heartbeat_interval_ms=v("group.share.heartbeat.interval.ms"),
            max_size=v("group.share.max.size"), max_groups=v("group.share.max.groups"),
            limits=PartitionLimits(self.lock_duration_ms, v("group.share.delivery.count.limit"),
                                   v("group.share.partition.max.record.locks"))))
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.read_committed: set[str] = set()         # groups with share.isolation.level=read_committed
        self.group_configs = GroupConfigs(config.log_dirs[0], self._config_changed, config)
        self._changed = trio.Event()           # records became available again
        self._lock = trio.Lock()                # one outcome's append at a time, in order
        self.states: ShareStates | None = None      # where share-partition state lives (attach_states)
        self.store = None       # a cluster's: this broker as a share coordinator (kwire.handlers.share_state)
        self.groups = None      # the GroupService: the groups' records go to its __consumer_offsets

    def attach_groups(self, groups) -> None:
        """Share groups' records are written to ``__consumer_offsets`` by ``groups`` (a
        GroupService, with its acks and flushes) and replayed from it with its other records."""
        self.groups = groups
        groups.share_replay = self.coordinator.replay_group_record

    def attach_states(self, states: ShareStates, group_config_store: GroupConfigStore) -> None:
        """Chosen when the broker is built: where the share-partitions' state lives and where
        the groups' configs are kept."""
        self.states = states
        self.group_configs.store = group_config_store

    def follow_leadership(self, led: set, group_configs: dict | None) -> None:
        """Cluster mode, after each ZooKeeper snapshot (``led``: the (topic, partition) pairs
        this broker leads; ``group_configs``: every group's, None before the first snapshot):
        drop the share groups of the __consumer_offsets partitions it no longer coordinates (the
        new coordinator replays them) and the share-partitions of the partitions it no longer
        leads (a new leader loads their persisted state); apply the groups' configs."""
        owned = self.groups.owned or set()
        topic = self.logs.get(OFFSETS_TOPIC)
        if topic is not None:
            n = len(topic.partitions)
            for group_id in [g for g in self.coordinator.groups if partition_for(g, n) not in owned]:
                self.coordinator.unload_group(group_id)
        if group_configs is not None:
            self.group_configs.apply_all(group_configs)
        state_topic = self.logs.get(SHARE_STATE_TOPIC)
        if state_topic is not None:
            state_topic.internal = True
        self.states.follow_leadership(led)

    def member_known(self, group_id: str, member_id: str) -> bool:
        """Whether ShareFetch may serve the member: any member in cluster mode (the group
        coordinator may be another broker), a member of the group on a single node."""
        return self.states.member_known(group_id, member_id)

    async def start_and_lag(self, key: Key, high_watermark: int) -> tuple[int, int]:
        """DescribeShareGroupOffsets: (start offset, lag) of a share-partition, (-1, -1) when
        it has no state.  Raises KafkaApiError."""
        return await self.states.start_and_lag(key, high_watermark)

    def _config_changed(self, group_id: str, name: str, value: str | None) -> None:
        if name == "share.auto.offset.reset":
            self.coordinator.set_offset_reset(group_id, value)
        elif name == "share.record.lock.duration.ms":
            self.coordinator.set_lock_duration(group_id, None if value is None else int(value))
        elif name == "share.isolation.level":
            (self.read_committed.add if value == "read_committed" else self.read_committed.discard)(group_id)

    def replay(self) -> int:
        """Load the group configs and replay ``__share_group_state``; returns the record count."""
        self.group_configs.load()
        topic = self.logs.get(SHARE_STATE_TOPIC)
        if topic is None:
            return 0
        topic.internal = True
        count = 0
        for plog in topic.partitions:
            for batch, record in records_to_end(plog):
                if not batch.is_control_batch and record.key is not None:
                    self.coordinator.replay(record.key, record.value)
                    count += 1
        if count:
            logger.info("replayed %d share-state record(s) from %s", count, SHARE_STATE_TOPIC)
        return count

    # -- membership -----------------------------------------------------------------------
    async def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id, subscribed,
                        client_id: str, client_host: str) -> HeartbeatResult:
        topics = {}
        for name in subscribed or ():
            t = self.logs.get(name)
            if t is not None:
                topics[name] = Topic(name, t.topic_id, len(t.partitions))
        if subscribed is None and member_epoch != 0:      # unchanged: keep the member's topics
            group = self.coordinator.groups.get(group_id)
            member = group.members.get(member_id) if group else None
            for name in member.subscribed if member else ():
                t = self.logs.get(name)
                if t is not None:
                    topics[name] = Topic(name, t.topic_id, len(t.partitions))
        await self._offsets_topic(group_id)      # first: the call and its records' append are one step
        # a member leaving with its share session open: the session's close settles its records
        outcome = self.coordinator.heartbeat(group_id, member_id, member_epoch, rack_id, subscribed, topics,
                                             client_id, client_host, self.clock.now_ms(),
                                             release=(group_id, member_id) not in self.sessions)
        await self._apply_group(outcome.group_records)
        await self._apply(outcome.records)
        return outcome.result

    # -- sessions -------------------------------------------------------------------------
    def check_session(self, group_id: str, member_id: str, epoch: int, topics, forgotten) -> ShareSession | None:
        """The share session of this request, updated with its ``topics`` and ``forgotten``
        ((topic_id, [partitions]) each); None for a closing one (epoch -1).  Raises
        KafkaApiError(UNKNOWN_MEMBER_ID | SHARE_SESSION_NOT_FOUND | INVALID_SHARE_SESSION_EPOCH)."""
        key = (group_id, member_id)
        if epoch == 0:
            if not self.member_known(group_id, member_id):
                raise KafkaApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"{member_id} is not a member of {group_id}")
            session = self.sessions[key] = ShareSession(1)
        else:
            session = self.sessions.get(key)
            if session is None and epoch == FINAL_EPOCH:
                return None          # closed already (librdkafka may close after leaving): nothing to do
            if session is None:
                raise KafkaApiError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no share session for this member")
            if epoch == FINAL_EPOCH:
                del self.sessions[key]
                return None
            if epoch != session.epoch:
                raise KafkaApiError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"expected share session epoch {session.epoch}, got {epoch}")
            session.epoch = 1 if session.epoch >= 0x7FFFFFFF else session.epoch + 1
        for topic_id, partitions in topics:
            session.partitions.update((topic_id, p) for p in partitions)
        for topic_id, partitions in forgotten:
            session.partitions.difference_update((topic_id, p) for p in partitions)
        return session

    # -- acknowledgements -------------------------------------------------------------------
    async def acknowledge(self, group_id: str, member_id: str,
                          acks: dict[tuple[uuid.UUID, int], list]) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """Apply each partition's acknowledgement batches, persist, then return their errors."""
        errors, records = {}, []
        for (topic_id, partition), batches in acks.items():
            topic = self.logs.topics_by_id.get(topic_id)
            if topic is None:
                errors[(topic_id, partition)] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            try:
                await self.states.load(group_id, topic, topic_id, partition)
            except KafkaApiError as exc:
                errors[(topic_id, partition)] = exc.code
                continue
            outcome = self.coordinator.acknowledge(group_id, member_id, topic_id, partition, batches,
                                                   self.clock.now_ms())
            errors[(topic_id, partition)] = outcome.result
            records += outcome.records
        failed = await self._apply(records)
        for (_group, topic_id, partition), code in failed.items():
            if errors.get((topic_id, partition)) == ErrorCode.NONE:
                errors[(topic_id, partition)] = code
        return errors

    async def release_member(self, group_id: str, member_id: str) -> None:
        """A share session closed: the member's acquired records are available again."""
        await self._apply(self.coordinator.release_member(group_id, member_id).records)

    # -- fetching -----------------------------------------------------------------------------
    async def acquire(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                      max_bytes: int, max_records: int, record_limit: bool = False) -> tuple[bytes, list]:
        """The record bytes (whole batches) and the ranges acquired for the member (at most
        ``max_records`` with ``record_limit``); raises KafkaApiError for the partition."""
        topic = self.logs.topics_by_id.get(topic_id)
        if topic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_ID)
        if not 0 <= partition < len(topic.partitions):
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        plog = topic.partitions[partition]
        if plog.absent:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{topic.name}-{partition} is not on this broker")
        try:
            await self.states.load(group_id, topic, topic_id, partition)
        except KafkaApiError as exc:
            if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                raise
            logger.info("share-partition %s %s-%d not loaded: %s %s", group_id, topic.name, partition,
                        exc.code.name, exc.message)
            return b"", []                 # its share coordinator is away: nothing this time
        outcome = self.coordinator.share_partition(group_id, topic_id, partition, plog.log_start_offset,
                                                   plog.high_watermark)
        if outcome.records and await self._apply(outcome.records):
            # its initial state is not persisted: not served until it is (the next fetch retries)
            self.coordinator.unload_partition((group_id, topic_id, partition))
            return b"", []
        sp = outcome.result
        committed = group_id in self.read_committed
        upper = plog.last_stable_offset if committed else plog.high_watermark
        offset = sp.fetch_offset(upper)
        if offset is None or offset >= upper:
            return b"", []
        data = plog.read_slices(offset, max_bytes, min_one_batch=True, max_offset=upper).to_bytes()
        bounds = batch_bounds(data)
        skip = aborted_batches(data, bounds, plog.aborted_transactions(offset, upper)) if committed else set()
        # a control batch, or (read_committed) an aborted transaction's batch: archived, never delivered
        ranges = self.coordinator.acquire(group_id, member_id, topic_id, partition,
                                          [(b, l, c or b in skip) for b, l, c, _ in bounds], max_records,
                                          self.clock.now_ms(), record_limit)
        logger.debug("share fetch %s %s-%d from %d (hw %d): batches %s acquired %s", group_id, topic.name, partition,
                     offset, plog.high_watermark, [(b, l, c) for b, l, c, _ in bounds], ranges)
        if not ranges:
            return b"", []
        last_acquired = ranges[-1][1]
        end = next(e for b, l, c, e in bounds if l >= last_acquired)
        return data[:end], ranges

    async def wait_available(self, broker, partitions, deadline: float) -> None:
        """Until new records reach ``partitions`` ((topic, partition) names), records become
        available again, or ``deadline`` (trio clock)."""
        changed = self._changed
        async with trio.open_nursery() as nursery:
            async def appended():
                await broker.wait_appended(partitions, deadline)
                nursery.cancel_scope.cancel()

            async def released():
                with trio.move_on_at(deadline):
                    await changed.wait()
                nursery.cancel_scope.cancel()
            nursery.start_soon(appended)
            nursery.start_soon(released)

    # -- admin ---------------------------------------------------------------------------------
    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: its state (tombstones) and its group configs go too."""
        await self._offsets_topic(group_id)
        outcome = self.coordinator.delete_group(group_id, assigned=not self.states.holds_every_partition)
        await self._apply_group(outcome.group_records)
        await self._apply(outcome.records)
        if outcome.result == ErrorCode.NONE and group_id in self.group_configs.configs:
            await self.group_configs.alter(group_id, [], False, False)
        return outcome.result

    async def reset_offsets(self, group_id: str, starts: dict) -> dict:
        """Alter/DeleteShareGroupOffsets: each share-partition of ``starts`` ({(topic_id,
        partition): start offset, or None to delete its state}) afresh.  Raises KafkaApiError
        (NOT_COORDINATOR, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) for the group; returns
        {(topic_id, partition): ErrorCode} of the share-partitions not reset."""
        self.check_group_owner(group_id)
        async with self._lock:            # in order with the other state writes
            error = self.coordinator.check_empty(group_id)
            if error:
                raise KafkaApiError(error, f"share group {group_id}: {error.name}")
            failed = {}
            for (topic_id, partition), start in starts.items():
                try:
                    await self.states.reset((group_id, topic_id, partition), start)
                except KafkaApiError as exc:
                    failed[(topic_id, partition)] = exc.code
        self._changed.set()
        self._changed = trio.Event()
        return failed

    def check_group_owner(self, group_id: str) -> None:
        """Cluster mode: raises KafkaApiError(NOT_COORDINATOR) unless this broker coordinates the group."""
        if self.groups is not None:
            self.groups.check_owner(group_id)

    # -- outcomes and timers -----------------------------------------------------------------
    async def _offsets_topic(self, group_id: str) -> None:
        """Before a call that writes the group's records: ``__consumer_offsets`` exists (single
        node: created on first use) and this broker coordinates the group (else NOT_COORDINATOR)."""
        if self.groups is not None:
            await self.groups.offsets_topic()
            self.groups.check_owner(group_id)

    async def _apply_group(self, records: list) -> None:
        """Append the groups' records to ``__consumer_offsets`` as the group coordinator
        appends its own (flushed per policy; in a cluster, acks=all) before the answer."""
        if records and self.groups is not None:
            if self.logs.get(OFFSETS_TOPIC) is None:
                await self.groups.offsets_topic()
            await self.groups.apply(Outcome(records=records))

    async def _apply(self, records: list) -> dict:
        """Persist the records where the state lives (``states``), then wake the parked
        fetches; returns the share-partitions not persisted with why."""
        failed = {}
        if records:
            async with self._lock:
                failed = await self.states.persist(records)
            self._changed.set()
            self._changed = trio.Event()
        return failed

    async def run_timers(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Tick the coordinator every TICK_S: session timeouts and acquisition-lock expiry."""
        task_status.started()
        while True:
            await trio.sleep(TICK_S)
            outcome = self.coordinator.tick(self.clock.now_ms())
            for key in outcome.result:          # a member gone silent: its share session goes too
                self.sessions.pop(key, None)
            await self._apply_group(outcome.group_records)
            await self._apply(outcome.records)
            async with self._lock:
                self.states.unload_idle(self.sessions)
