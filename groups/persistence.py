"""Writing group metadata records and rebuilding groups from them (part of ``GroupCoordinator``).

As in Kafka, a group record is written when a generation becomes Stable,
when a group becomes Empty and when a static member takes a new member id;
a replayed group with members is Stable, without members Empty.  Offsets of
a group whose metadata was tombstoned survive as a "simple" group.
"""
from __future__ import annotations

import logging

from .effects import Effects
from .group import Group, GroupState, Member, OffsetEntry
from .records import (
    GroupKey, GroupRecordError, GroupValue, MemberValue, OffsetKey, decode_group_value, decode_key,
    decode_offset_value, encode_group_value, group_key,
)
from .consumer_records import decode_consumer_key
from .results import Record

logger = logging.getLogger("kwire.groups")


class PersistenceMixin:
    def _store_group(self, fx: Effects, group: Group) -> None:
        members = tuple(
            MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        m.session_timeout_ms, m.metadata(group.protocol_name), m.assignment)
            for m in group.members.values())
        value = GroupValue(group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
                           -1 if group.state_timestamp is None else group.state_timestamp, members)
        fx.append(Record(group.group_id, group_key(group.group_id), encode_group_value(value)))

    def unload_groups(self, predicate) -> int:
        """Forget the groups whose id satisfies ``predicate`` (their offsets partition is led by
        another broker now, which replays them); returns how many.  Timers of a forgotten
        group are skipped when they fire (the heap is cleaned lazily)."""
        doomed = [g for g in self._groups if predicate(g)]
        for group_id in doomed:
            del self._groups[group_id]
            self._scheduled.pop(group_id, None)
            self._stale.discard(group_id)
            self._unscheduled.discard(group_id)
        consumer = [g for g in self._consumer_groups if predicate(g)]
        for group_id in consumer:
            del self._consumer_groups[group_id]
            self._consumer_unscheduled.discard(group_id)
        return len(doomed) + len(consumer)

    def replay(self, key: bytes, value: bytes | None, producer_id: int | None = None) -> bool:
        """Apply one ``__consumer_offsets`` record at start-up (value None = tombstone).

        A record of a transactional batch (``producer_id``) is an offset commit held
        pending until ``replay_marker`` sees its transaction's marker.

        Returns False for a record that was skipped: a key of a kind this
        coordinator does not own, or bytes that do not decode (logged, so one
        damaged record cannot stop the broker from starting).  Members get
        their session deadline from the first call that carries a clock.
        """
        try:
            k = decode_key(bytes(key)) if key is not None else None
            if isinstance(k, OffsetKey) and producer_id is not None:
                if value is not None:
                    v = decode_offset_value(bytes(value))
                    group = self._groups.get(k.group_id)
                    if group is None:
                        group = self._groups[k.group_id] = Group(k.group_id, state_timestamp=v.commit_timestamp)
                    group.pending_txn_offsets.setdefault(producer_id, {})[(k.topic, k.partition)] = OffsetEntry(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
                    self._stale.add(k.group_id)
            elif isinstance(k, OffsetKey):
                self._replay_offset(k, None if value is None else decode_offset_value(bytes(value)))
            elif isinstance(k, GroupKey):
                self._replay_group(k.group_id, None if value is None else decode_group_value(bytes(value)))
            else:
                ck = decode_consumer_key(bytes(key)) if key is not None else None
                if ck is None:
                    return False
                self._replay_consumer(ck, None if value is None else bytes(value))
        except GroupRecordError as e:
            logger.warning("skipping undecodable group record (key %r): %s", key, e)
            return False
        return True

    def replay_marker(self, producer_id: int, commit: bool, in_partition) -> None:
        """A COMMIT/ABORT marker met while replaying the offsets partition ``in_partition`` selects."""
        for group in self._groups.values():
            if producer_id in group.pending_txn_offsets and in_partition(group.group_id):
                self._complete_group_txn(group, producer_id, commit)

    def _replay_offset(self, k: OffsetKey, v) -> None:
        group = self._groups.get(k.group_id)
        if v is None:
            if group is not None:
                group.offsets.pop((k.topic, k.partition), None)
                if group.generation_id == 0 and self._droppable(group):
                    del self._groups[k.group_id]
                self._stale.add(k.group_id)
            return
        if group is None:
            group = self._groups[k.group_id] = Group(k.group_id, state_timestamp=v.commit_timestamp)
        group.offsets[(k.topic, k.partition)] = OffsetEntry(v.offset, v.leader_epoch, v.metadata,
                                                            v.commit_timestamp, v.expire_timestamp)
        self._stale.add(k.group_id)

    def _replay_group(self, group_id: str, v: GroupValue | None) -> None:
        old = self._groups.get(group_id)
        offsets = old.offsets if old is not None else {}
        self._stale.add(group_id)
        if v is None:
            if offsets:
                self._groups[group_id] = Group(group_id, state_timestamp=old.state_timestamp, offsets=offsets)
            else:
                self._groups.pop(group_id, None)
            return
        # A group is rebuilt in its settled state, not walked through the transitions.
        group = Group(group_id, GroupState.STABLE if v.members else GroupState.EMPTY, offsets=offsets,
                      generation_id=v.generation_id, protocol_type=v.protocol_type or None,
                      protocol_name=v.protocol_name,
                      state_timestamp=None if v.current_state_timestamp < 0 else v.current_state_timestamp)
        for m in v.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, group.protocol_type or "",
                            [(v.protocol_name or "", m.subscription)], assignment=m.assignment)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.leader_id = v.leader_id if v.leader_id in group.members else next(iter(group.members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        self._groups[group_id] = group
        if group.members:
            self._unscheduled.add(group_id)
