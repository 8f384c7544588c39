"""Share-partition state in a cluster (``kwire.services.share_state.ShareStates``): the
share-partition leader (the data partition's leader) keeps a copy, and the share coordinators
(``kwire.cluster.share_coordinator``) hold the state.

It loads a share-partition's state from its share coordinator on first use, once
``broker.partitions`` says this broker leads the partition (NOT_LEADER_OR_FOLLOWER elsewhere),
and writes every change there, with the leader epoch it loaded under, before the service
answers.  It drops its share-partitions when it stops leading their partition, so a new leader
starts from the persisted state: records acquired and not acknowledged are available again,
acknowledged ones stay acknowledged.  Share-partitions no session reads and no lock holds are
dropped after each tick, so a group deleted and created again, or state changed elsewhere, is
read afresh.  Membership is served by the group coordinator, maybe another broker: a share
session opens for any member id here.
"""
from __future__ import annotations

import logging
import uuid

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.internal_topics import SHARE_STATE_TOPIC
from kwire.groups.share_partition import persisted_lag
from kwire.groups.share_records import ShareState, decode_key, decode_value

from kwire.services.share_state import UNKNOWN, Key
from kwire.cluster.share_coordinator import Persister, ShareStateStore

logger = logging.getLogger("kwire.share")


class PersistedShareStates:
    """``shares``: the ShareService whose coordinator holds the loaded share-partitions."""

    holds_every_partition = False

    def __init__(self, broker, shares, partitions):
        self.shares = shares
        self.coordinator = shares.coordinator
        self.logs = shares.logs
        self.partitions = partitions            # broker.partitions: leadership
        self.store = ShareStateStore(broker)              # this broker as a share coordinator
        self.persister = Persister(broker, self.store)
        self.epochs: dict[Key, int] = {}          # loaded share-partition -> its leader epoch then
        self._load_lock = trio.Lock()

    def member_known(self, group_id: str, member_id: str) -> bool:
        return True

    async def load(self, group_id: str, topic, topic_id: uuid.UUID, partition: int) -> None:
        if not 0 <= partition < len(topic.partitions):
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        leader = self.partitions.check_writer(topic.name, partition, topic.partitions[partition])
        key = (group_id, topic_id, partition)
        if key in self.coordinator.partitions:
            return
        async with self._load_lock:
            if key in self.coordinator.partitions:
                return
            state = await self.persister.read(key, leader.leader_epoch)
            if state is None:              # it starts from share.auto.offset.reset
                await self.shares.group_configs.refresh(group_id)
            if not self.partitions.still_leads(topic.name, partition, leader):
                raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved while loading")
            self.epochs[key] = leader.leader_epoch
            if state is not None:
                self.coordinator.load_partition(key, state)
                logger.info("share-partition %s %s-%d loaded (start offset %d, %d batch(es), leader epoch %d)",
                            group_id, topic.name, partition, state.start_offset, len(state.batches),
                            leader.leader_epoch)

    async def persist(self, records: list) -> dict:
        """Each snapshot (tombstone: delete) to its share coordinator, stamped with the leader
        epoch the share-partition was loaded under."""
        failed = {}
        for key, value in records:
            k = decode_key(key)
            pkey = (k.group_id, k.topic_id, k.partition)
            state = None
            if value is not None:
                epoch = self.epochs.get(pkey)
                if epoch is None:              # not (or no longer) its leader: nothing to write
                    failed[pkey] = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    continue
                state = decode_value(k.kind, value)
                state = type(state)(state.snapshot_epoch, state.state_epoch, epoch, state.start_offset,
                                    state.batches)
            try:
                await self.persister.write(pkey, state)
            except KafkaApiError as exc:
                logger.warning("share state of %s not written: %s %s", pkey, exc.code.name, exc.message)
                failed[pkey] = exc.code
                # a newer leader has it, or its offsets were altered or deleted: drop ours
                if exc.code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
                    self._unload(pkey)
        return failed

    async def start_and_lag(self, key: Key, high_watermark: int) -> tuple[int, int]:
        """From the share coordinator, read without a leader epoch (no leader is fenced)."""
        state = await self.persister.read(key, -1)
        if state is None or state.start_offset < 0:
            return UNKNOWN, UNKNOWN
        return state.start_offset, persisted_lag(state, high_watermark)

    async def reset(self, key: Key, start_offset: int | None) -> None:
        """At the share coordinator, with the next state epoch (a leader still holding the old
        state is fenced on its next write, FENCED_STATE_EPOCH, and loads the new one)."""
        old = await self.persister.read(key, -1)
        self._unload(key)
        if start_offset is None:
            if old is not None:
                await self.persister.write(key, None)
            return
        state = ShareState(0, 0 if old is None else old.state_epoch + 1, -1 if old is None else old.leader_epoch,
                           start_offset, ())
        await self.persister.write(key, state)

    def follow_leadership(self, led: set) -> None:
        """Also follow the leadership of the __share_group_state partitions as their share
        coordinator."""
        for key in [k for k in self.coordinator.partitions if self._data_tp(k) not in led]:
            self._unload(key)
        self.store.follow_leadership({p for (t, p) in led if t == SHARE_STATE_TOPIC})

    def unload_idle(self, sessions: dict) -> None:
        in_use = {(group_id, topic_id, p) for (group_id, _), session in sessions.items()
                  for topic_id, p in session.partitions}
        for key, sp in list(self.coordinator.partitions.items()):
            if key not in in_use and sp.next_lock_deadline() is None:
                self._unload(key)

    def _unload(self, key: Key) -> None:
        self.coordinator.unload_partition(key)
        self.epochs.pop(key, None)

    def _data_tp(self, key: Key) -> tuple[str, int] | None:
        topic = self.logs.topics_by_id.get(key[1])
        return None if topic is None else (topic.name, key[2])
