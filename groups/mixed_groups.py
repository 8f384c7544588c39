"""Mixed groups: classic members in KIP-848 consumer groups, online upgrade and downgrade
(part of ``GroupCoordinator``).

Kafka's rules (GroupMetadataManager, trunk of late 2024):

* A JoinGroup on a non-empty consumer group makes the caller a *classic member* of it
  (``classicGroupJoinToConsumerGroup``), whatever the migration policy: its subscription
  (ConsumerProtocolSubscription of its first protocol) updates the group like a heartbeat,
  the server-side assignor computes the target, and the member is reconciled with the
  partitions its subscription says it owns.  The answer is immediate: generation = member
  epoch, no leader, no member list, so the client syncs as a follower.
* SyncGroup returns the member's assigned partitions as a ConsumerProtocolAssignment
  (REBALANCE_IN_PROGRESS while the group epoch is ahead of the member's and it has nothing
  to revoke); Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin (its epoch
  is behind the group's, it has partitions to revoke, or the partitions it waits for are
  free); LeaveGroup removes it.  A classic member's OffsetCommit generation must equal its
  epoch (ILLEGAL_GENERATION otherwise).  Its session timeout is its JoinGroup's.
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

A classic member told to rejoin must do so within its rebalance timeout, and one that joined
must sync within it, or it is fenced (Kafka's join and sync timeouts; like Kafka's timers they
are not persisted).

Not done: the downgrade when a classic static member replaces the last consumer-protocol one,
and one group-epoch bump per LeaveGroup batch (kwire bumps per member).
"""
from __future__ import annotations

import uuid

from kwire.codecs.errors import ErrorCode

from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from .consumer_records import (
    GROUP_METADATA, PARTITION_METADATA, TARGET_MEMBER, TARGET_METADATA, ClassicMetadata, consumer_key,
    encode_group_epoch, encode_partition_metadata, encode_target_member,
)
from .effects import Effects
from .group import CONSUMER_PROTOCOL_TYPE, Group, GroupState, Member
from .records import GroupRecordError, group_key
from .results import JoinRequest, JoinResult, Record, SyncRequest, SyncResult

E = ErrorCode
MEMBER_ID_REQUIRED_MIN_VERSION = 4


class MixedGroupsMixin:
    # -- policy ---------------------------------------------------------------------
    def _policy_allows(self, direction: str) -> bool:
        return self.config.consumer.migration_policy in (direction, "bidirectional")

    def _session_timeout_of(self, member: ConsumerMember) -> int:
        return member.classic.session_timeout_ms if member.classic is not None \
            else self.config.consumer.session_timeout_ms

    # -- upgrade ----------------------------------------------------------------------
    def _upgraded(self, classic: Group, topics) -> ConsumerGroup | None:
        """The consumer group a non-empty classic group becomes (not registered yet: ``_adopt``
        does that once the heartbeat is accepted), or None when Kafka's rules refuse it."""
        if not self._policy_allows("upgrade") or classic.protocol_type != CONSUMER_PROTOCOL_TYPE \
                or len(classic.members) > self.config.consumer.max_size:
            return None
        group = ConsumerGroup(classic.group_id, group_epoch=classic.generation_id,
                              assignment_epoch=classic.generation_id)
        try:
            for m in classic.members.values():
                sub = decode_subscription(m.metadata(classic.protocol_name))
                assigned = _to_ids(decode_assignment(m.assignment), topics)
                group.add(ConsumerMember(
                    m.member_id, m.group_instance_id, sub.rack_id, m.client_id, m.client_host, sub.topics,
                    rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=classic.generation_id,
                    previous_member_epoch=classic.generation_id, assigned=assigned,
                    classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))))
                group.target[m.member_id] = dict(assigned)
        except GroupRecordError:
            return None            # Kafka: GROUP_ID_NOT_FOUND, the embedded protocol is malformed
        group.subscription_metadata = self._subscription_metadata(group, topics)
        group.update_state()
        return group

    def _write_upgrade(self, fx: Effects, group: ConsumerGroup) -> None:
        """Records and side effects of an accepted upgrade: the classic group's metadata is
        tombstoned, its parked requests answered REBALANCE_IN_PROGRESS, its offsets kept in an
        offsets-only holder; the consumer group is written whole (Kafka's createConsumerGroupRecords)."""
        gid = group.group_id
        classic = self._groups[gid]
        for m in classic.members.values():
            self._answer_join(fx, m, JoinResult(E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
            self._answer_sync(fx, m, SyncResult(E.REBALANCE_IN_PROGRESS))
        fx.append(Record(gid, group_key(gid), None))
        self._groups[gid] = Group(gid, state_timestamp=fx.now_ms, offsets=classic.offsets,
                                  pending_txn_offsets=classic.pending_txn_offsets)
        fx.touch(gid)
        for m in group.members.values():
            fx.append(self._member_record(gid, m))
        fx.append(Record(gid, consumer_key(PARTITION_METADATA, gid),
                         encode_partition_metadata(group.subscription_metadata)))
        fx.append(Record(gid, consumer_key(GROUP_METADATA, gid), encode_group_epoch(group.group_epoch)))
        for m in group.members.values():
            fx.append(Record(gid, consumer_key(TARGET_MEMBER, gid, m.member_id),
                             encode_target_member(group.target[m.member_id])))
        fx.append(Record(gid, consumer_key(TARGET_METADATA, gid), encode_group_epoch(group.assignment_epoch)))
        for m in group.members.values():
            fx.append(self._assignment_record(gid, m))
            m.session_deadline_ms = fx.now_ms + self._session_timeout_of(m)

    # -- downgrade --------------------------------------------------------------------
    def _fence_or_downgrade(self, fx: Effects, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Remove a member that left or was fenced; Kafka's online downgrade when it was the last
        consumer-protocol member."""
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        if (others and all(m.classic is not None for m in others) and self._policy_allows("downgrade")
                and len(others) <= self.config.max_size and self._downgrade(fx, group, member.member_id)):
            return
        self._fence(fx, group, member)

    def _downgrade(self, fx: Effects, group: ConsumerGroup, leaving_id: str) -> bool:
        gid = group.group_id
        holder = self._groups.get(gid)
        classic = Group(gid, GroupState.STABLE, state_timestamp=fx.now_ms, generation_id=group.group_epoch,
                        protocol_type=CONSUMER_PROTOCOL_TYPE,
                        offsets=holder.offsets if holder is not None else {},
                        pending_txn_offsets=holder.pending_txn_offsets if holder is not None else {})
        for m in group.members.values():
            if m.member_id != leaving_id:
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
            return False           # no common protocol or a malformed one: stay a consumer group
        for member_id in list(group.members):
            self._member_tombstones(fx, gid, member_id)
            group.remove(member_id)
        self._delete_consumer_group(fx, group, keep_offsets=True)
        classic.subscribed_topics = classic.compute_subscribed_topics()
        self._groups[gid] = classic
        self._store_group(fx, classic)
        fx.touch(gid)
        self._prepare_rebalance(fx, classic)
        return True

    # -- the classic APIs on a consumer group -------------------------------------------
    def _classic_join_to_consumer(self, fx: Effects, ticket: int, req: JoinRequest, group: ConsumerGroup,
                                  topics) -> None:
        try:
            fx.complete(ticket, self._classic_join(fx, req, group, topics or {}))
        except _Refused as e:
            fx.complete(ticket, JoinResult(e.code, member_id=e.member_id))

    def _classic_join(self, fx: Effects, req: JoinRequest, group: ConsumerGroup, topics) -> JoinResult:
        member_id = req.member_id or str(uuid.uuid4())
        if member_id not in group.members and len(group.members) >= self.config.consumer.max_size:
            raise _Refused(E.GROUP_MAX_SIZE_REACHED, member_id)
        if not self._supports_classic(group, member_id, req):
            raise _Refused(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not req.member_id and req.group_instance_id is None and req.api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            raise _Refused(E.MEMBER_ID_REQUIRED, member_id)
        try:
            sub = decode_subscription(req.protocols[0][1])
        except GroupRecordError:
            raise _Refused(E.INCONSISTENT_GROUP_PROTOCOL, member_id) from None
        member = self._classic_member_for(fx, group, member_id, req)
        updated = ConsumerMember(**member.__dict__)
        updated.instance_id = req.group_instance_id if req.group_instance_id is not None else member.instance_id
        if sub.rack_id is not None:
            updated.rack_id = sub.rack_id
        updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        updated.subscribed_topic_names = sub.topics
        updated.client_id, updated.client_host = req.client_id, req.client_host
        updated.classic = ClassicMetadata(req.session_timeout_ms, tuple(req.protocols))
        owned = tuple((tid, tuple(ps)) for tid, ps in _to_ids(dict(sub.owned or ()), topics).items())
        reconciled = self._consumer_member_update(fx, group, member, updated, member.member_id not in group.members,
                                                  topics, owned)
        reconciled.session_deadline_ms = fx.now_ms + req.session_timeout_ms
        reconciled.join_deadline_ms = None
        reconciled.sync_deadline_ms = fx.now_ms + max(req.rebalance_timeout_ms, 0)
        return JoinResult(E.NONE, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE, req.protocols[0][0], "",
                          reconciled.member_id, False, [])

    def _classic_member_for(self, fx: Effects, group: ConsumerGroup, member_id: str, req: JoinRequest
                            ) -> ConsumerMember:
        if req.group_instance_id is None:
            return group.members.get(member_id) or ConsumerMember(member_id)
        existing_id = group.static_members.get(req.group_instance_id)
        if existing_id is None:
            return group.members.get(member_id) or ConsumerMember(member_id)
        if req.member_id and req.member_id != existing_id:
            raise _Refused(E.FENCED_INSTANCE_ID, member_id)
        existing = group.members[existing_id]
        if existing_id == member_id:
            return existing
        new = ConsumerMember(**{**existing.__dict__, "member_id": member_id})
        self._replace_static(fx, group, existing, new)
        return new

    @staticmethod
    def _supports_classic(group: ConsumerGroup, member_id: str, req: JoinRequest) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: protocol type consumer and a protocol
        name every other classic member supports."""
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return False
        others = [m for m in group.members.values() if m.classic is not None and m.member_id != member_id]
        names = {n for n, _ in req.protocols}
        return not others or any(all(n in {p for p, _ in m.classic.protocols} for m in others) for n in names)

    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None
                        ) -> tuple[ConsumerMember | None, ErrorCode | None]:
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            current = group.static_members.get(instance_id)
            member = group.members.get(current) if current is not None else None
            if member is not None and member_id and member.member_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        if member is None or member.classic is None:
            return None, E.UNKNOWN_MEMBER_ID
        return member, None

    def _classic_sync_to_consumer(self, fx: Effects, ticket: int, req: SyncRequest, group: ConsumerGroup) -> None:
        member, error = self._classic_member(group, req.member_id, req.group_instance_id)
        if error is None and req.generation_id != member.member_epoch:
            error = E.ILLEGAL_GENERATION
        if error is None and ((req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name != member.classic.protocols[0][0])):
            error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is None and group.group_epoch > member.member_epoch \
                and member.state is not MemberState.UNREVOKED_PARTITIONS:
            error = E.REBALANCE_IN_PROGRESS
            self._expect_rejoin(fx, member)
        if error is not None:
            fx.complete(ticket, SyncResult(error))
            return
        member.sync_deadline_ms = None
        member.session_deadline_ms = fx.now_ms + member.classic.session_timeout_ms
        fx.touch(group.group_id)
        names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
        try:
            version = decode_subscription(member.classic.protocols[0][1]).version
        except GroupRecordError:
            version = 0
        assignment = encode_assignment(version, {names[tid]: ps for tid, ps in member.assigned.items() if tid in names})
        fx.complete(ticket, SyncResult(E.NONE, CONSUMER_PROTOCOL_TYPE, member.classic.protocols[0][0], assignment))

    def _classic_heartbeat_to_consumer(self, fx: Effects, group: ConsumerGroup, generation_id: int, member_id: str,
                                       instance_id: str | None) -> ErrorCode:
        member, error = self._classic_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        member.session_deadline_ms = fx.now_ms + member.classic.session_timeout_ms
        fx.touch(group.group_id)
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, member)):
            self._expect_rejoin(fx, member)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    @staticmethod
    def _expect_rejoin(fx: Effects, member: ConsumerMember) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent."""
        if member.join_deadline_ms is None:
            member.join_deadline_ms = fx.now_ms + max(member.rebalance_timeout_ms, 0)

    @staticmethod
    def _classic_timed_out(member: ConsumerMember, now_ms: int) -> bool:
        return any(at is not None and at <= now_ms for at in (member.join_deadline_ms, member.sync_deadline_ms))

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
        owners = group.owners()
        return any(owners.get((tid, p), member.member_id) != member.member_id
                   for tid, ps in group.target.get(member.member_id, {}).items()
                   for p in ps if p not in member.assigned.get(tid, ()))

    def _classic_leave_to_consumer(self, fx: Effects, group: ConsumerGroup, member_id: str,
                                   instance_id: str | None) -> ErrorCode:
        member, error = self._classic_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._fence(fx, group, member)
        return E.NONE


class _Refused(Exception):
    def __init__(self, code: ErrorCode, member_id: str):
        super().__init__(code)
        self.code, self.member_id = code, member_id


def _to_ids(by_name: dict, topics) -> dict:
    """Topic name -> partitions as topic id -> frozenset, leaving out topics that do not exist."""
    return {topics[name][0]: frozenset(ps) for name, ps in by_name.items() if name in topics and ps}
