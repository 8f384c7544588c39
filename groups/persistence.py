"""Group metadata records, and rebuilding the groups from the records of ``__consumer_offsets``
(``GroupLoader``: Kafka's GroupCoordinatorShard.replay, which hands each record to its manager).

As in Kafka, a group record is written when a generation becomes Stable,
when a group becomes Empty and when a static member takes a new member id;
a replayed group with members is Stable, without members Empty.  Offsets of
a group whose metadata was tombstoned survive as a "simple" group.
"""
from __future__ import annotations

import logging

from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .consumer_records import (
    GROUP_METADATA, MEMBER_METADATA, PARTITION_METADATA, TARGET_MEMBER, TARGET_METADATA,
    ConsumerKey, decode_assignment_epoch, decode_consumer_key, decode_current_assignment, decode_epoch, decode_member_metadata,
    decode_partition_metadata, decode_target_member,
)
from .context import GroupContext
from .group import Group, GroupState, Member, OffsetEntry
from .offsets import complete_group_txn, droppable
from .records import (
    GroupKey, GroupRecordError, GroupValue, MemberValue, OffsetKey, decode_group_value, decode_key,
    decode_offset_value, encode_group_value, group_key,
)
from .results import Record

logger = logging.getLogger("kwire.groups")


def group_record(group: Group) -> Record:
    """The metadata record of a classic group as it is now (Kafka's GroupMetadataValue)."""
    members = tuple(
        MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                    m.session_timeout_ms, m.metadata(group.protocol_name), m.assignment)
        for m in group.members.values())
    value = GroupValue(group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
                       -1 if group.state_timestamp is None else group.state_timestamp, members)
    return Record(group.group_id, group_key(group.group_id), encode_group_value(value))


class GroupLoader:
    """Replays ``__consumer_offsets`` into the group tables of ``ctx``; tells ``timers`` which
    groups came back, so their deadlines are set from the next clock."""

    def __init__(self, ctx: GroupContext, timers):
        """``timers``: the ``timers.GroupTimers`` (not imported here: it imports this module's
        neighbours, and the files must not form an import cycle)."""
        self._ctx = ctx
        self._timers = timers

    def unload_groups(self, predicate) -> int:
        """Forget the groups whose id satisfies ``predicate`` (their offsets partition is led by
        another broker now, which replays them); returns how many.  Timers of a forgotten
        group are skipped when they fire (the heap is cleaned lazily)."""
        groups, consumer_groups = self._ctx.groups, self._ctx.consumer_groups
        doomed = [g for g in groups if predicate(g)]
        for group_id in doomed:
            del groups[group_id]
            self._timers.forget(group_id)
        consumer = [g for g in consumer_groups if predicate(g)]
        for group_id in consumer:
            del consumer_groups[group_id]
            self._timers.forget_consumer_group(group_id)
        return len(doomed) + len(consumer)

    def replay(self, key: bytes, value: bytes | None, producer_id: int | None = None) -> bool:
        """``GroupCoordinator.replay``: one ``__consumer_offsets`` record; False if skipped."""
        try:
            k = decode_key(bytes(key)) if key is not None else None
            if isinstance(k, OffsetKey) and producer_id is not None:
                if value is not None:
                    v = decode_offset_value(bytes(value))
                    group = self._ctx.groups.get(k.group_id)
                    if group is None:
                        group = self._ctx.groups[k.group_id] = Group(k.group_id, state_timestamp=v.commit_timestamp)
                    group.pending_txn_offsets.setdefault(producer_id, {})[(k.topic, k.partition)] = OffsetEntry(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
                    self._timers.replayed(k.group_id)
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
        for group in self._ctx.groups.values():
            if producer_id in group.pending_txn_offsets and in_partition(group.group_id):
                complete_group_txn(group, producer_id, commit)

    def _replay_offset(self, k: OffsetKey, v) -> None:
        group = self._ctx.groups.get(k.group_id)
        if v is None:
            if group is not None:
                group.offsets.pop((k.topic, k.partition), None)
                if group.generation_id == 0 and droppable(group):
                    del self._ctx.groups[k.group_id]
                self._timers.replayed(k.group_id)
            return
        if group is None:
            group = self._ctx.groups[k.group_id] = Group(k.group_id, state_timestamp=v.commit_timestamp)
        group.offsets[(k.topic, k.partition)] = OffsetEntry(v.offset, v.leader_epoch, v.metadata,
                                                            v.commit_timestamp, v.expire_timestamp)
        self._timers.replayed(k.group_id)

    def _replay_group(self, group_id: str, v: GroupValue | None) -> None:
        old = self._ctx.groups.get(group_id)
        offsets = old.offsets if old is not None else {}
        self._timers.replayed(group_id)
        if v is None:
            if offsets:
                self._ctx.groups[group_id] = Group(group_id, state_timestamp=old.state_timestamp, offsets=offsets)
            else:
                self._ctx.groups.pop(group_id, None)
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
        self._ctx.groups[group_id] = group
        if group.members:
            self._timers.replayed_members(group_id)

    def _replay_consumer(self, k: ConsumerKey, value: bytes | None) -> None:
        """Apply one consumer-group record (value None = tombstone); a replayed group is
        rebuilt in its settled state, its members' sessions start at the next clock."""
        gid = k.group_id
        group = self._ctx.consumer_groups.get(gid)
        if group is None:
            if value is None:
                return
            group = self._ctx.consumer_groups[gid] = ConsumerGroup(gid)
        if k.record_type == GROUP_METADATA:
            if value is None:
                del self._ctx.consumer_groups[gid]
                self._timers.forget_consumer_group(gid)
                return
            group.group_epoch = decode_epoch(value)
        elif k.record_type == PARTITION_METADATA:
            group.subscription_metadata = decode_partition_metadata(value) if value is not None else {}
        elif k.record_type == TARGET_METADATA:
            group.assignment_epoch = decode_assignment_epoch(value) if value is not None else 0
        elif k.record_type == TARGET_MEMBER:
            if value is None:
                group.target.pop(k.member_id, None)
            else:
                group.target[k.member_id] = decode_target_member(value)
        elif k.record_type == MEMBER_METADATA:
            if value is None:
                group.remove(k.member_id)
            else:
                v = decode_member_metadata(value)
                member = group.members.get(k.member_id) or ConsumerMember(k.member_id)
                member.instance_id, member.rack_id, member.client_id, member.client_host = (
                    v.instance_id, v.rack_id, v.client_id, v.client_host)
                member.subscribed_topic_names, member.subscribed_topic_regex = (
                    v.subscribed_topic_names, v.subscribed_topic_regex)
                member.rebalance_timeout_ms, member.server_assignor = v.rebalance_timeout_ms, v.server_assignor
                member.classic = v.classic
                member.session_deadline_ms = None
                group.add(member)
                self._timers.replayed_consumer_group(gid)
        elif value is not None:        # CURRENT_ASSIGNMENT
            member = group.members.get(k.member_id)
            if member is None:         # Kafka writes the member's metadata first
                member = ConsumerMember(k.member_id)
                group.add(member)
                self._timers.replayed_consumer_group(gid)
            c = decode_current_assignment(value)
            member.member_epoch, member.previous_member_epoch = c.member_epoch, c.previous_member_epoch
            member.state = MemberState(c.state) if c.state in MemberState._value2member_map_ else MemberState.UNKNOWN
            member.assigned, member.pending_revocation = dict(c.assigned), dict(c.pending_revocation)
        group.state = group.update_state()
        self._timers.replayed_consumer_group(gid)        # sessions and the empty group's removal need a clock
