"""The share-partitions of the share groups (KIP-932) and their ``__share_group_state`` records.

``SharePartitions`` holds one ``SharePartition`` per (group, topic id, partition) with the
group configs that shape them (share.auto.offset.reset, share.record.lock.duration.ms).
It is the share coordinator's partition manager, as Kafka's SharePartitionManager beside
its GroupCoordinator: ``ShareCoordinator`` owns it and routes ShareFetch/ShareAcknowledge
work here.  Each method that changes a share-partition returns the records to append:
(key, value) pairs of ``__share_group_state`` (a snapshot of the partition's state).
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Callable

from kwire.codecs.errors import ErrorCode

from .share_partition import InvalidRecordState, InvalidRequest, PartitionLimits, SharePartition
from .share_records import SNAPSHOT_KEY, decode_key, decode_value, encode_key, encode_snapshot

Key = tuple[str, uuid.UUID, int]      # (group_id, topic_id, partition)


class SharePartitions:
    def __init__(self, default_limits: Callable[[], PartitionLimits]):
        """``default_limits()``: the broker's limits of every share-partition (ShareConfig.limits)."""
        self._default_limits = default_limits
        self.partitions: dict[Key, SharePartition] = {}
        # the group config share.auto.offset.reset (default latest); a group need not exist yet
        self.offset_resets: dict[str, str] = {}
        self.lock_durations: dict[str, int] = {}      # the group config share.record.lock.duration.ms

    # -- fetch and acknowledge -------------------------------------------------------------
    def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int, log_start_offset: int,
                        high_watermark: int) -> tuple[list, SharePartition]:
        """(records, the share-partition), initialized on first use from the group's
        share.auto.offset.reset; its initial state is a record to persist."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        records = []
        if sp is None:
            reset = self.offset_resets.get(group_id, "latest")
            start = log_start_offset if reset == "earliest" else high_watermark
            sp = self.partitions[key] = SharePartition(self.limits(group_id), start)
            records.append(self.snapshot(key, sp))
        if sp.skip_to(log_start_offset):
            records.append(self.snapshot(key, sp))
        return records, sp

    def acquire(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                batches: list[tuple[int, int]], max_records: int, now_ms: int,
                record_limit: bool = False) -> list[tuple[int, int, int]]:
        """Acquisition is not persisted (as in Kafka): a crash makes the records available again."""
        sp = self.partitions[(group_id, topic_id, partition)]
        return sp.acquire(member_id, batches, max_records, now_ms, record_limit)

    def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                    batches: list[tuple[int, int, list[int]]], now_ms: int = 0) -> tuple[list, ErrorCode]:
        """(records, error) of the acknowledgement batches of one partition.  Each batch is all
        or nothing; the first failing one is the partition's error."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is None:
            return [], ErrorCode.INVALID_RECORD_STATE
        error = ErrorCode.NONE
        for first, last, types in batches:
            try:
                sp.acknowledge(member_id, first, last, list(types), now_ms)
            except InvalidRequest:
                error = error or ErrorCode.INVALID_REQUEST
            except InvalidRecordState:
                error = error or ErrorCode.INVALID_RECORD_STATE
        return [self.snapshot(key, sp)], error

    def release_member(self, group_id: str, member_id: str) -> list:
        """The member's acquired records become available again; the snapshots of the
        share-partitions it held."""
        records = []
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                records.append(self.snapshot(key, sp))
        return records

    def expire_locks(self, now_ms: int) -> list:
        """Acquisition locks past their deadline are released; the snapshots of those partitions."""
        return [self.snapshot(key, sp) for key, sp in self.partitions.items() if sp.expire_locks(now_ms)]

    @staticmethod
    def snapshot(key: Key, sp: SharePartition) -> tuple[bytes, bytes]:
        group_id, topic_id, partition = key
        return encode_key(SNAPSHOT_KEY, group_id, topic_id, partition), encode_snapshot(sp.state())

    # -- leadership, deletion -------------------------------------------------------------
    def load_partition(self, key: Key, state) -> None:
        """Install a share-partition's persisted state (its share coordinator's)."""
        self.partitions[key] = SharePartition.from_state(self.limits(key[0]), state)

    def unload_partition(self, key: Key) -> None:
        self.partitions.pop(key, None)

    def reset(self, key: Key, start_offset: int | None) -> list:
        """AlterShareGroupOffsets (``start_offset``) and DeleteShareGroupOffsets (None) of an
        empty group: the share-partition starts afresh at ``start_offset`` with nothing in
        flight and the next state epoch, or is forgotten (initialized again from
        share.auto.offset.reset on its next fetch); its snapshot or tombstone, none when
        there is nothing to delete."""
        old = self.partitions.pop(key, None)
        if start_offset is None:
            return [] if old is None else [(encode_key(SNAPSHOT_KEY, *key), None)]
        sp = self.partitions[key] = SharePartition(self.limits(key[0]), start_offset,
                                                   0 if old is None else old.state_epoch + 1)
        return [self.snapshot(key, sp)]

    def delete_group(self, group_id: str, assigned=()) -> list:
        """Forget the group's configs and share-partitions, those here and (``assigned``:
        (topic id, partition) pairs) those led elsewhere; their tombstones."""
        self.offset_resets.pop(group_id, None)
        self.lock_durations.pop(group_id, None)
        keys = {k for k in self.partitions if k[0] == group_id}
        keys |= {(group_id, topic_id, p) for topic_id, p in assigned}
        records = []
        for key in sorted(keys, key=lambda k: (str(k[1]), k[2])):
            self.partitions.pop(key, None)
            records.append((encode_key(SNAPSHOT_KEY, *key), None))
        return records

    # -- group configs --------------------------------------------------------------------
    def limits(self, group_id: str) -> PartitionLimits:
        duration = self.lock_durations.get(group_id)
        limits = self._default_limits()
        return limits if duration is None else replace(limits, record_lock_duration_ms=duration)

    def set_lock_duration(self, group_id: str, duration_ms: int | None) -> None:
        """Set (None: back to the broker's) the group's record lock duration; it applies to the
        acquisitions from now on."""
        if duration_ms is None:
            self.lock_durations.pop(group_id, None)
        else:
            self.lock_durations[group_id] = duration_ms
        for key, sp in self.partitions.items():
            if key[0] == group_id:
                sp.limits = self.limits(group_id)

    def set_offset_reset(self, group_id: str, value: str | None) -> None:
        """Set (None: back to the default, latest) the group's share.auto.offset.reset; it
        applies to the share-partitions initialized from now on."""
        if value is None:
            self.offset_resets.pop(group_id, None)
        else:
            self.offset_resets[group_id] = value

    def start_offsets(self, group_id: str) -> dict:
        """{(topic id, partition): SharePartition} of the group's initialized share-partitions."""
        return {(t, p): sp for (g, t, p), sp in self.partitions.items() if g == group_id}

    # -- start-up -------------------------------------------------------------------------
    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one ``__share_group_state`` record (value None: tombstone) at start-up."""
        k = decode_key(key)
        if k is None:
            return
        pkey = (k.group_id, k.topic_id, k.partition)
        if value is None:
            self.partitions.pop(pkey, None)
            return
        state = decode_value(k.kind, value)
        if k.kind == SNAPSHOT_KEY:
            self.partitions[pkey] = SharePartition.from_state(self.limits(k.group_id), state)
        elif pkey in self.partitions:
            sp = self.partitions[pkey]
            if state.start_offset >= 0:
                sp.skip_to(state.start_offset)
            sp.apply_batches(state.batches)
        # the group itself comes from its __consumer_offsets records (replay_group_record), not
        # from here: an older snapshot of a deleted group's share-partition would bring it back
