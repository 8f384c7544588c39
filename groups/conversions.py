"""The online upgrade and downgrade between a classic group and a KIP-848 consumer group.

Kafka's rules (GroupMetadataManager, trunk of late 2024):

* Upgrade (``validateOnlineUpgrade``/``convertToConsumerGroup``): a ConsumerGroupHeartbeat
  joining a non-empty classic group converts it when the policy allows upgrades, the group
  uses protocol type ``consumer`` and its size is within group.consumer.max.size; parked
  JoinGroup/SyncGroup answers get REBALANCE_IN_PROGRESS; each member keeps its last
  assignment at epoch = the generation.  Otherwise GROUP_ID_NOT_FOUND, as before.
* Downgrade (``validateOnlineDowngradeWithFencedMember``/``convertToClassicGroup``): when the
  last consumer-protocol member leaves or is fenced and every other member is classic, the
  policy allows downgrades and the rest fit group.max.size, the group becomes a classic
  group (generation = group epoch, each member's target assignment as its assignment) and
  a rebalance starts.

The consumer-group manager holds a ``GroupConversions`` and decides when to call it; the
rebalance after a downgrade is the classic-group manager's.

Not done: the downgrade when a classic static member replaces the last consumer-protocol one.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from .classic_groups import ClassicGroupManager, answer_join, answer_sync
from .consumer_coordinator import assignment_record, member_record, session_timeout_of, subscription_metadata
from .consumer_group import ConsumerGroup, ConsumerMember
from .consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from .consumer_records import (
    GROUP_METADATA, PARTITION_METADATA, TARGET_MEMBER, TARGET_METADATA, ClassicMetadata, consumer_key,
    encode_assignment_epoch, encode_group_epoch, encode_partition_metadata, encode_target_member,
)
from .context import GroupContext
from .effects import Effects
from .group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from .persistence import group_record
from .records import GroupRecordError, group_key
from .results import JoinResult, Record, SyncResult

E = ErrorCode


class GroupConversions:
    def __init__(self, ctx: GroupContext, classic: ClassicGroupManager):
        self._ctx = ctx
        self._config = ctx.config
        self._classic = classic

    def _policy_allows(self, direction: str) -> bool:
        return self._config.consumer.migration_policy in (direction, "bidirectional")

    # -- upgrade ----------------------------------------------------------------------
    def upgraded(self, classic: Group, topics) -> ConsumerGroup | None:
        """The consumer group a non-empty classic group becomes (not registered yet: the
        consumer-group manager does that once the heartbeat is accepted, and calls
        ``write_upgrade``), or None when Kafka's rules refuse it."""
        if not self._policy_allows("upgrade") or classic.protocol_type != CONSUMER_PROTOCOL_TYPE \
                or len(classic.members) > self._config.consumer.max_size:
            return None
        group = ConsumerGroup(classic.group_id, group_epoch=classic.generation_id,
                              assignment_epoch=classic.generation_id)
        try:
            for m in classic.members.values():
                sub = decode_subscription(m.metadata(classic.protocol_name))
                assigned = topic_ids(decode_assignment(m.assignment), topics)
                group.add(ConsumerMember(
                    m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host, sub.topics,
                    rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=classic.generation_id,
                    previous_member_epoch=classic.generation_id, assigned=assigned,
                    classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))))
                group.target[m.member_id] = dict(assigned)
        except GroupRecordError:
            return None            # Kafka: GROUP_ID_NOT_FOUND, the embedded protocol is malformed
        group.subscription_metadata = subscription_metadata(group, topics)
        group.update_state()
        return group

    def write_upgrade(self, fx: Effects, group: ConsumerGroup) -> None:
        """Records and side effects of an accepted upgrade: the classic group's metadata is
        tombstoned, its parked requests answered REBALANCE_IN_PROGRESS, its offsets kept in an
        offsets-only holder; the consumer group is written whole (Kafka's createConsumerGroupRecords)."""
        gid = group.group_id
        classic = self._ctx.groups[gid]
        for m in classic.members.values():
            answer_join(fx, m, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
            answer_sync(fx, m, SyncResult(E.REBALANCE_IN_PROGRESS))
        fx.append(Record(gid, group_key(gid), None))
        self._ctx.groups[gid] = Group(gid, state_timestamp=fx.now_ms, offsets=classic.offsets,
                                      pending_txn_offsets=classic.pending_txn_offsets)
        fx.touch(gid)
        for m in group.members.values():
            fx.append(member_record(gid, m))
        fx.append(Record(gid, consumer_key(PARTITION_METADATA, gid),
                         encode_partition_metadata(group.subscription_metadata)))
        fx.append(Record(gid, consumer_key(GROUP_METADATA, gid), encode_group_epoch(group.group_epoch)))
        for m in group.members.values():
            fx.append(Record(gid, consumer_key(TARGET_MEMBER, gid, m.member_id),
                             encode_target_member(group.target[m.member_id])))
        fx.append(Record(gid, consumer_key(TARGET_METADATA, gid), encode_assignment_epoch(group.assignment_epoch)))
        for m in group.members.values():
            fx.append(assignment_record(gid, m))
            m.session_deadline_ms = fx.now_ms + session_timeout_of(m, self._config)

    # -- downgrade --------------------------------------------------------------------
    def downgraded(self, fx: Effects, group: ConsumerGroup, leaving_id: str) -> Group | None:
        """The classic group ``group`` becomes when ``leaving_id`` leaves (not installed yet:
        ``install``), or None when Kafka's rules keep it a consumer group.  Changes nothing."""
        others = [m for m in group.members.values() if m.member_id != leaving_id]
        if not (others and all(m.classic is not None for m in others) and self._policy_allows("downgrade")
                and len(others) <= self._config.max_size):
            return None
        holder = self._ctx.groups.get(group.group_id)
        classic = Group(group.group_id, GroupState.STABLE, state_timestamp=fx.now_ms,
                        generation_id=group.group_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE,
                        offsets=holder.offsets if holder is not None else {},
                        pending_txn_offsets=holder.pending_txn_offsets if holder is not None else {})
        for m in others:
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols),
                               deadline_ms=fx.now_ms + m.classic.session_timeout_ms))
        try:
            classic.protocol_name = classic.select_protocol()
            names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
            for member in classic.members.values():
                version = decode_subscription(member.metadata(classic.protocol_name)).version
                target = group.target.get(member.member_id, {})
                member.assignment = encode_assignment(version, {names[tid]: ps for tid, ps in target.items()
                                                                if tid in names})
        except (ValueError, GroupRecordError):
            return None            # no common protocol or a malformed one: stay a consumer group
        return classic

    def install(self, fx: Effects, classic: Group) -> None:
        """The consumer group is gone (its records tombstoned): ``classic`` takes its place,
        is written, and rebalances."""
        classic.subscribed_topics = classic.compute_subscribed_topics()
        self._ctx.groups[classic.group_id] = classic
        fx.append(group_record(classic))
        fx.touch(classic.group_id)
        self._classic.prepare_rebalance(fx, classic)


def topic_ids(by_name: dict, topics) -> dict:
    """Topic name -> partitions as topic id -> frozenset, leaving out topics that do not exist."""
    return {topics[name][0]: frozenset(ps) for name, ps in by_name.items() if name in topics and ps}
