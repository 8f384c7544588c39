"""Mixed groups: classic members in KIP-848 consumer groups (``ClassicMembers``).

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

A classic member told to rejoin must do so within its rebalance timeout, and one that joined
must sync within it, or it is fenced (Kafka's join and sync timeouts; like Kafka's timers they
are not persisted).  The online upgrade and downgrade are in ``conversions``.

``GroupCoordinator`` routes JoinGroup, SyncGroup and Heartbeat of a consumer group with
members here, and LeaveGroup of any consumer group; the members change through the
consumer-group manager.

Not done: one group-epoch bump per LeaveGroup batch (kwire bumps per member).
"""
from __future__ import annotations

import uuid

from kwire.codecs.errors import ErrorCode

from .consumer_coordinator import ConsumerGroupManager
from .consumer_group import ConsumerGroup, ConsumerMember, MemberState
from .consumer_protocol import decode_subscription, encode_assignment
from .consumer_records import ClassicMetadata
from .context import GroupContext
from .conversions import topic_ids
from .effects import Effects
from .group import CONSUMER_PROTOCOL_TYPE
from .records import GroupRecordError
from .results import JoinRequest, JoinResult, LeaveResult, SyncRequest, SyncResult

E = ErrorCode
MEMBER_ID_REQUIRED_MIN_VERSION = 4


class ClassicMembers:
    """The classic APIs on the consumer groups of ``ctx.consumer_groups``."""

    def __init__(self, ctx: GroupContext, consumer: ConsumerGroupManager):
        self._ctx = ctx
        self._config = ctx.config
        self._consumer = consumer

    def join(self, fx: Effects, ticket: int, req: JoinRequest, group: ConsumerGroup, topics) -> None:
        """JoinGroup: the caller becomes (or stays) a classic member of ``group``; answered at once."""
        try:
            fx.complete(ticket, self._join(fx, req, group, topics or {}))
        except _Refused as e:
            fx.complete(ticket, JoinResult(e.code, member_id=e.member_id))

    def _join(self, fx: Effects, req: JoinRequest, group: ConsumerGroup, topics) -> JoinResult:
        member_id = req.member_id or str(uuid.uuid4())
        if member_id not in group.members and len(group.members) >= self._config.consumer.max_size:
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
        owned = tuple((tid, tuple(ps)) for tid, ps in topic_ids(dict(sub.owned or ()), topics).items())
        reconciled = self._consumer.member_update(fx, group, member, updated, member.member_id not in group.members,
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
        self._consumer.replace_static(fx, group, existing, new)
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

    def sync(self, fx: Effects, ticket: int, req: SyncRequest, group: ConsumerGroup) -> None:
        """SyncGroup: the member's assigned partitions as a ConsumerProtocolAssignment."""
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

    def heartbeat(self, fx: Effects, group: ConsumerGroup, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        """Heartbeat: REBALANCE_IN_PROGRESS when the member must rejoin."""
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
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
        owners = group.owners()
        return any(owners.get((tid, p), member.member_id) != member.member_id
                   for tid, ps in group.target.get(member.member_id, {}).items()
                   for p in ps if p not in member.assigned.get(tid, ()))

    def leave(self, fx: Effects, group: ConsumerGroup, members: list[tuple[str | None, str | None, str | None]]
              ) -> LeaveResult:
        """LeaveGroup of (member_id, group_instance_id, reason): each member is fenced."""
        return LeaveResult(E.NONE, [self._leave_one(fx, group, member_id or "", instance_id)
                                    for member_id, instance_id, _reason in members])

    def _leave_one(self, fx: Effects, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        member, error = self._classic_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._consumer.fence(fx, group, member)
        return E.NONE


class _Refused(Exception):
    def __init__(self, code: ErrorCode, member_id: str):
        super().__init__(code)
        self.code, self.member_id = code, member_id
