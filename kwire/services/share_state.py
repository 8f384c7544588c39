"""Where a share-partition's state is kept (KIP-932), the parts both modes share.

A share-partition is (group, topic id, partition).  Its state (``ShareState``: the share-partition
start offset and the batches past it with their delivery state and count) is written as
``ShareSnapshot`` records keyed by ``encode_key(SNAPSHOT_KEY, group, topic id, partition)`` to
``__share_group_state``, partition ``crc32(key) % partitions`` (``state_partition``), on a
single node (``kwire.services.share_states.LocalShareStates``) and in a cluster alike; there
the leader of that partition is the key's share coordinator
(``kwire.cluster.share_coordinator``).  Kafka's ShareUpdate records (changed batches over
the last snapshot) are read and merged (``merge_update``), not written.

What differs between one node and a cluster is behind ``ShareStates``, chosen when the broker
is built: ``LocalShareStates`` (here: the share coordinator's memory is where the state lives,
every change appended to ``__share_group_state`` and replayed at start-up) or
``kwire.cluster.share_states.PersistedShareStates`` (the share-partition leader loads the state
from its share coordinator on first use and writes every change there before answering).
"""
from __future__ import annotations

import uuid
import zlib
from typing import Protocol, runtime_checkable

from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.groups.internal_topics import SHARE_STATE, SHARE_STATE_TOPIC
from kwire.groups.share_partition import share_lag
from kwire.groups.share_records import SNAPSHOT_KEY, ShareState, StateBatch, encode_key

from kwire.runtime.blocking import create_topic, run_blocking

Key = tuple[str, uuid.UUID, int]         # (group_id, topic_id, partition)
UNKNOWN = -1


def state_partition(key: Key, partitions: int) -> int:
    return zlib.crc32(encode_key(SNAPSHOT_KEY, *key)) % partitions


def merge_update(base: ShareState, update: ShareState) -> ShareState:
    """A ShareUpdate's batches over its snapshot's (the later batch wins where they overlap)."""
    start = update.start_offset if update.start_offset >= 0 else base.start_offset
    batches = [b for b in base.batches if b.last_offset >= start]
    for u in update.batches:
        kept = []
        for b in batches:
            if b.last_offset < u.first_offset or b.first_offset > u.last_offset:
                kept.append(b)
                continue
            if b.first_offset < u.first_offset:
                kept.append(StateBatch(b.first_offset, u.first_offset - 1, b.delivery_state, b.delivery_count))
            if b.last_offset > u.last_offset:
                kept.append(StateBatch(u.last_offset + 1, b.last_offset, b.delivery_state, b.delivery_count))
        batches = sorted(kept + [u], key=lambda b: b.first_offset)
    return ShareState(base.snapshot_epoch, base.state_epoch, max(base.leader_epoch, update.leader_epoch), start,
                      tuple(batches))


_merge = merge_update          # its earlier name


@runtime_checkable
class ShareStates(Protocol):
    """Where share-partition state lives, as the share-group service (``kwire.services.shares``)
    asks about it.  ``records``: the coordinator's (snapshot key, value | None) pairs."""

    # True when this broker holds every share-partition's state (a deleted group's tombstones
    # then cover those here; otherwise also those of every partition its members were assigned)
    holds_every_partition: bool

    def member_known(self, group_id: str, member_id: str) -> bool:
        """Whether a share session may open for the member: a member of the group here when
        this broker coordinates every group; any member when the group coordinator may be
        another broker (a share-partition leader does not check membership)."""

    async def load(self, group_id: str, topic, topic_id: uuid.UUID, partition: int) -> None:
        """Before a share-partition is served or acknowledged: raises KafkaApiError
        (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, the persister's) unless this
        broker may serve it now, having loaded its state from where it lives on first use."""

    async def persist(self, records: list) -> dict:
        """Write ``records`` where the state lives; returns {Key: ErrorCode} of the
        share-partitions not written (their change must not be answered as done)."""

    async def start_and_lag(self, key: Key, high_watermark: int) -> tuple[int, int]:
        """(start offset, lag) of the share-partition ``key`` as DescribeShareGroupOffsets
        gives them, (-1, -1) when it has no state.  Raises KafkaApiError."""

    async def reset(self, key: Key, start_offset: int | None) -> None:
        """Alter/DeleteShareGroupOffsets of an empty group (the caller checked): the
        share-partition ``key`` starts afresh at ``start_offset`` with the next state epoch,
        or (None) its state is deleted where it exists.  Raises KafkaApiError."""

    def follow_leadership(self, led: set) -> None:
        """The (topic, partition) pairs this broker leads now: forget the share-partitions of
        the others (a new leader loads their persisted state)."""

    def unload_idle(self, sessions: dict) -> None:
        """After a timer tick (under the service's append lock): forget the share-partitions
        no share session in ``sessions`` reads and no acquisition lock holds, when their state
        lives elsewhere."""


class LocalShareStates:
    """One node: the share coordinator's memory holds every share-partition's state, and each
    change is appended to ``__share_group_state`` (flushed per its policy) before the answer."""

    holds_every_partition = True

    def __init__(self, config, logs, clock, coordinator):
        self.config = config
        self.logs = logs
        self.clock = clock
        self.coordinator = coordinator

    def member_known(self, group_id: str, member_id: str) -> bool:
        return self.coordinator.is_member(group_id, member_id)

    async def load(self, group_id: str, topic, topic_id: uuid.UUID, partition: int) -> None:
        return None                 # the state is in memory already; a single node leads every partition

    async def persist(self, records: list) -> dict:
        await self.append(records)
        return {}

    async def start_and_lag(self, key: Key, high_watermark: int) -> tuple[int, int]:
        sp = self.coordinator.partitions.get(key)
        return (UNKNOWN, UNKNOWN) if sp is None else (sp.spso, share_lag(sp, high_watermark))

    async def reset(self, key: Key, start_offset: int | None) -> None:
        await self.append(self.coordinator.reset_partition(key, start_offset).records)

    def follow_leadership(self, led: set) -> None:
        return None                 # never asked: a single node's leadership does not move

    def unload_idle(self, sessions: dict) -> None:
        return None                 # the memory is where the state lives: nothing to load again

    async def state_topic(self):
        topic = self.logs.get(SHARE_STATE_TOPIC)
        if topic is None:
            v = self.config.value_of
            topic = await create_topic(self.logs, SHARE_STATE_TOPIC, SHARE_STATE.partitions(v), SHARE_STATE.configs(v),
                                       now_ms=self.clock.now_ms(), internal=True, exist_ok=True)
        return topic

    async def append(self, records: list) -> None:
        """Append (key, value) records (value None: tombstone), flushed per the topic's policy."""
        if not records:
            return
        topic = await self.state_topic()
        by_partition: dict[int, list] = {}
        for key, value in records:
            by_partition.setdefault(zlib.crc32(key) % len(topic.partitions), []).append((key, value))
        ts = self.clock.now_ms()
        flushes = []
        for p, items in by_partition.items():
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                                producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                                batch_size=2**31 - 1)
            for i, (key, value) in enumerate(items):
                builder.append(i, timestamp=ts, key=key, value=value, headers=[])
            plog = topic.partitions[p]
            if plog.append(bytes(builder.build()), now_ms=ts, built_here=True).needs_flush:
                flushes.append(plog)
        for plog in flushes:
            await run_blocking(plog.flush)
