"""The consumer-group manager: KIP-848 ConsumerGroupHeartbeat, ConsumerGroupDescribe and the
removal of members and groups (``GroupCoordinator`` routes those calls here).

The rules are Kafka's GroupMetadataManager.consumerGroupHeartbeat (trunk of late 2024):
validate; leave (epoch -1, static -2); get or create the group and the member;
a changed subscription or changed metadata of the subscribed topics bumps the group
epoch; a group epoch ahead of the assignment epoch recomputes the target assignment
with the assignor; the member is reconciled towards its target (``reconcile``).
Every change is written as Kafka's records (``consumer_records``) before the answer.

Offsets of a consumer group live where classic groups keep theirs: in an
offsets-only classic ``Group`` of the same id (generation 0, no members), so
OffsetCommit/OffsetFetch/offset expiry are shared; a group id in
``_consumer_groups`` is a consumer group, whatever that holder says.

Differences from Kafka, on purpose or not yet done: topic metadata is passed in
with each call and compared on every heartbeat (Kafka refreshes it on a timer);
regular expressions are Python ``re`` full matches resolved synchronously (Kafka:
RE2/J, resolved asynchronously and stored as records of type 16); an invalid
regex is INVALID_REQUEST (Kafka 4.x: INVALID_REGULAR_EXPRESSION, which kafka-python's
error table lacks).  Classic members in a consumer group (mixed groups) are served by
``mixed_groups``, which updates members through this manager; the online upgrade and
downgrade are ``conversions``, which this manager is given; empty groups convert either
way.  The timers of consumer groups are in ``timers``, their replay in ``persistence``.
"""
from __future__ import annotations

import uuid

from kwire.codecs.errors import ErrorCode

from .assignors import ASSIGNORS, MemberSubscription
from .consumer_group import (
    LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroup, ConsumerMember, MemberState, compiled, reconcile,
)
from .consumer_records import (
    CURRENT_ASSIGNMENT, GROUP_METADATA, MEMBER_METADATA, PARTITION_METADATA, TARGET_MEMBER, TARGET_METADATA,
    CurrentAssignment, MemberMetadata, consumer_key, encode_assignment_epoch, encode_current_assignment,
    encode_group_epoch, encode_member_metadata, encode_partition_metadata, encode_target_member,
)
from .context import GroupContext
from .effects import Effects
from .offsets import OffsetManager
from .records import group_key
from .results import (
    ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResult, ConsumerMemberDescription, GroupConfig,
    Record,
)

E = ErrorCode
Topics = dict  # name -> (topic id, partitions)


class Refused(Exception):
    """A heartbeat answered with an error; raised before any state changes."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message)
        self.code, self.message = code, message


class ConsumerGroupManager:
    """The KIP-848 consumer groups of ``ctx.consumer_groups``; their offsets are in the offsets-only
    classic ``Group`` of the same id, which ``offsets`` manages (and removes with the group)."""

    def __init__(self, ctx: GroupContext, offsets: OffsetManager, conversions):
        """``conversions``: the online upgrade and downgrade, a ``conversions.GroupConversions``
        (not imported here: that module imports this one)."""
        self._ctx = ctx
        self._config = ctx.config
        self._offsets = offsets
        self._conversions = conversions

    # -- ConsumerGroupHeartbeat ------------------------------------------------------
    def heartbeat(self, fx: Effects, req: ConsumerHeartbeat, topics: Topics) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat; ``topics`` is the cluster's topics, name -> (topic id, partitions)."""
        try:
            self._validate_heartbeat(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result = self._consumer_leave(fx, req)
            else:
                result = self._consumer_heartbeat(fx, req, topics)
        except Refused as e:
            result = ConsumerHeartbeatResult(e.code, e.message, None, 0, 0)     # Kafka's error answer
        return result

    def _validate_heartbeat(self, req: ConsumerHeartbeat) -> None:
        cfg = self._config.consumer
        if not req.group_id:
            raise Refused(E.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id == "":
            raise Refused(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise Refused(E.INVALID_REQUEST, "RackId can't be empty.")
        if req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id:
                raise Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
        elif req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise Refused(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or any(ps for _, ps in req.owned):
                raise Refused(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and req.subscribed_topic_regex is None:
                raise Refused(E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set "
                                                 "in first request.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if not req.member_id:
                raise Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
            if req.instance_id is None:
                raise Refused(E.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise Refused(E.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.subscribed_topic_regex is not None and compiled(req.subscribed_topic_regex) is None:
            raise Refused(E.INVALID_REQUEST, f"SubscribedTopicRegex {req.subscribed_topic_regex} is not valid.")
        if req.server_assignor is not None and req.server_assignor not in cfg.assignors:
            raise Refused(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                                                  f"Supported assignors: {', '.join(cfg.assignors)}.")

    def _consumer_group_or_refuse(self, group_id: str, create: bool, topics: Topics | None = None) -> ConsumerGroup:
        group = self._ctx.consumer_groups.get(group_id)
        if group is not None:
            return group
        classic = self._ctx.groups.get(group_id)
        if classic is not None and not self._ctx.offsets_only(classic):
            if create and classic.members:
                upgraded = self._conversions.upgraded(classic, topics or {})     # Kafka's online upgrade
                if upgraded is not None:
                    return upgraded
            if not create or classic.members or classic.pending_members:
                raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        elif not create:
            raise Refused(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def _consumer_heartbeat(self, fx: Effects, req: ConsumerHeartbeat, topics: Topics) -> ConsumerHeartbeatResult:
        cfg = self._config.consumer
        group = self._consumer_group_or_refuse(req.group_id, req.member_epoch == 0, topics)
        if len(group.members) >= cfg.max_size and (not req.member_id or req.member_id not in group.members):
            # Kafka's check, before the member id is made; a static member rejoining under a new id counts as new
            raise Refused(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                                                    f"{cfg.max_size} members.")
        member_id = req.member_id or str(uuid.uuid4())
        member, replaced = self._member_for(group, member_id, req)
        # From here on the heartbeat is accepted: state changes and records follow.
        if req.group_id not in self._ctx.consumer_groups:
            self._adopt(fx, group)
        if replaced is not None:
            self.replace_static(fx, group, replaced, member)
        updated = ConsumerMember(**member.__dict__)
        for name, value in (("instance_id", req.instance_id), ("rack_id", req.rack_id),
                            ("server_assignor", req.server_assignor),
                            ("subscribed_topic_regex", req.subscribed_topic_regex)):
            if value is not None:
                setattr(updated, name, value)
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(req.subscribed_topic_names)
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        updated.client_id, updated.client_host = req.client_id, req.client_host
        updated.classic = None          # a classic member rejoining with the consumer protocol
        updated.join_deadline_ms = updated.sync_deadline_ms = None
        is_new = member_id not in group.members
        reconciled = self.member_update(fx, group, member, updated, is_new, topics, req.owned)
        reconciled.session_deadline_ms = fx.now_ms + cfg.session_timeout_ms
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                                         and req.owned is not None)
        send = full or reconciled.assigned != member.assigned or is_new
        return ConsumerHeartbeatResult(E.NONE, None, reconciled.member_id, reconciled.member_epoch,
                                       cfg.heartbeat_interval_ms, dict(reconciled.assigned) if send else None)

    def member_update(self, fx: Effects, group: ConsumerGroup, member: ConsumerMember,
                                updated: ConsumerMember, is_new: bool, topics: Topics, owned) -> ConsumerMember:
        """Kafka's steps 1-3 of a heartbeat (or of a classic member's JoinGroup): store the member,
        bump the group epoch on a changed subscription, recompute the target assignment, reconcile."""
        bump = is_new or (updated.subscribed_topic_names, updated.subscribed_topic_regex, updated.server_assignor) != (
            member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)
        if is_new or updated.subscription_key() != member.subscription_key():
            fx.append(member_record(group.group_id, updated))
        group.add(updated)
        group.empty_since_ms = None
        metadata = subscription_metadata(group, topics)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            fx.append(Record(group.group_id, consumer_key(PARTITION_METADATA, group.group_id),
                             encode_partition_metadata(metadata)))
            bump = True
        if bump:
            group.group_epoch += 1
            fx.append(Record(group.group_id, consumer_key(GROUP_METADATA, group.group_id),
                             encode_group_epoch(group.group_epoch)))
        if group.group_epoch > group.assignment_epoch:
            self._update_target(fx, group)
        reconciled = self._reconcile(fx, group, updated, owned, fx.now_ms)
        group.update_state()
        fx.touch(group.group_id)
        return reconciled

    def _member_for(self, group: ConsumerGroup, member_id: str, req: ConsumerHeartbeat):
        """The member a heartbeat speaks for, and the static member it replaces (or None)."""
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if req.member_epoch != 0:
                    raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                       f"{group.group_id}.")
                return ConsumerMember(member_id), None
            if req.member_epoch != 0:
                self._check_epoch(member, req)
            return member, None
        existing_id = group.static_members.get(req.instance_id)
        existing = group.members.get(existing_id) if existing_id is not None else None
        if req.member_epoch == 0:
            if existing is None:
                return group.members.get(member_id) or ConsumerMember(member_id), None
            if existing.member_epoch != STATIC_LEAVE_EPOCH and existing.member_id != member_id:
                raise Refused(E.UNRELEASED_INSTANCE_ID, f"Static member {member_id} with instance id "
                              f"{req.instance_id} cannot join the group because the instance id is owned by "
                              f"{existing.member_id} member.")
            if existing.member_id == member_id:
                return existing, None
            new = ConsumerMember(**{**existing.__dict__, "member_id": member_id, "member_epoch": 0,
                                    "previous_member_epoch": 0})
            return new, existing
        if existing is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise Refused(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {req.instance_id} "
                                                f"was fenced by member {existing.member_id}.")
        self._check_epoch(existing, req)
        return existing, None

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: ConsumerHeartbeat) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member one epoch behind whose owned
        partitions are a subset of its assignment lost our last answer and is accepted."""
        if req.member_epoch > member.member_epoch:
            raise Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                                 f"({req.member_epoch}) than the one known by the group "
                                                 f"coordinator ({member.member_epoch}).")
        if req.member_epoch < member.member_epoch:
            subset = req.owned is not None and all(tid in member.assigned and set(ps) <= member.assigned[tid]
                                                    for tid, ps in req.owned)
            if req.member_epoch != member.previous_member_epoch or not subset:
                raise Refused(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                                     f"({req.member_epoch}) than the one known by the group "
                                                     f"coordinator ({member.member_epoch}).")

    def _adopt(self, fx: Effects, group: ConsumerGroup) -> None:
        """A new consumer group; an empty classic group of the id is converted (its metadata
        record tombstoned, its offsets kept), as Kafka's maybeDeleteEmptyClassicGroup."""
        classic = self._ctx.groups.get(group.group_id)
        if classic is not None and classic.members:
            self._conversions.write_upgrade(fx, group)
        elif classic is not None and not self._ctx.offsets_only(classic):
            fx.append(Record(group.group_id, group_key(group.group_id), None))
            classic.generation_id = 0
            classic.protocol_type = classic.protocol_name = classic.leader_id = None
        self._ctx.consumer_groups[group.group_id] = group

    def replace_static(self, fx: Effects, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> None:
        """A static member rejoined under a new member id: it takes the old one's assignment."""
        target = group.target.get(old.member_id, {})
        member_tombstones(fx, group.group_id, old.member_id)
        group.remove(old.member_id)
        group.add(new)
        group.target[new.member_id] = target
        fx.append(member_record(group.group_id, new))
        fx.append(Record(group.group_id, consumer_key(TARGET_MEMBER, group.group_id, new.member_id),
                         encode_target_member(target)))
        fx.append(assignment_record(group.group_id, new))

    def _assignor_of(self, group: ConsumerGroup) -> str:
        """Kafka's preferred server assignor: the one most members name, else the configured default."""
        counts: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self._config.consumer.assignors[0]
        return max(sorted(counts), key=lambda a: counts[a])

    def _update_target(self, fx: Effects, group: ConsumerGroup) -> None:
        subs = {m.member_id: MemberSubscription(
            frozenset(n for n in group.subscription_metadata if m.matches(n)), group.target.get(m.member_id, {}))
            for m in group.members.values()}
        new = ASSIGNORS[self._assignor_of(group)](subs, group.subscription_metadata)
        for member_id, assignment in sorted(new.items()):
            if assignment != group.target.get(member_id):
                fx.append(Record(group.group_id, consumer_key(TARGET_MEMBER, group.group_id, member_id),
                                 encode_target_member(assignment)))
            group.target[member_id] = assignment
        group.assignment_epoch = group.group_epoch
        fx.append(Record(group.group_id, consumer_key(TARGET_METADATA, group.group_id),
                         encode_assignment_epoch(group.assignment_epoch)))

    def _reconcile(self, fx: Effects, group: ConsumerGroup, member: ConsumerMember, owned, now_ms: int
                   ) -> ConsumerMember:
        owners = group.owners()
        new = reconcile(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                        lambda tid, p: owners.get((tid, p)), owned)
        if new is not member:
            if (new.member_epoch, new.previous_member_epoch, new.state, new.assigned, new.pending_revocation) != (
                    member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
                    member.pending_revocation):
                fx.append(assignment_record(group.group_id, new))
            group.members[new.member_id] = new
        if new.state is MemberState.UNREVOKED_PARTITIONS:
            if new.rebalance_deadline_ms is None or new.pending_revocation != member.pending_revocation:
                new.rebalance_deadline_ms = now_ms + max(new.rebalance_timeout_ms, 0)
        else:
            new.rebalance_deadline_ms = None
        return new

    # -- leaving and fencing ------------------------------------------------------------
    def _consumer_leave(self, fx: Effects, req: ConsumerHeartbeat) -> ConsumerHeartbeatResult:
        group = self._consumer_group_or_refuse(req.group_id, False)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                   f"{group.group_id}.")
        else:
            member_id = group.static_members.get(req.instance_id)
            if member_id is None:
                raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member_id != req.member_id:
                raise Refused(E.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                                                    f"{req.instance_id} was fenced by member {member_id}.")
            member = group.members[member_id]
            if req.member_epoch == STATIC_LEAVE_EPOCH:
                # A temporary leave: the member keeps its assignment until its session expires.
                member.member_epoch = STATIC_LEAVE_EPOCH
                member.pending_revocation = {}
                member.rebalance_deadline_ms = None
                fx.append(assignment_record(group.group_id, member))
                group.update_state()
                fx.touch(group.group_id)
                return ConsumerHeartbeatResult(E.NONE, None, member.member_id, STATIC_LEAVE_EPOCH, 0)
        self.fence_or_downgrade(fx, group, member)
        return ConsumerHeartbeatResult(E.NONE, None, req.member_id, req.member_epoch, 0)

    def fence(self, fx: Effects, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Remove a member (it left, its session expired, or it did not revoke in time); the
        group epoch goes up so the others are given its partitions."""
        member_tombstones(fx, group.group_id, member.member_id)
        group.remove(member.member_id)
        metadata = {n: v for n, v in group.subscription_metadata.items()
                    if any(m.matches(n) for m in group.members.values())}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            fx.append(Record(group.group_id, consumer_key(PARTITION_METADATA, group.group_id),
                             encode_partition_metadata(metadata)))
        group.group_epoch += 1
        fx.append(Record(group.group_id, consumer_key(GROUP_METADATA, group.group_id),
                         encode_group_epoch(group.group_epoch)))
        group.update_state()
        if not group.members:
            group.empty_since_ms = fx.now_ms
        fx.touch(group.group_id)

    def fence_or_downgrade(self, fx: Effects, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Remove a member that left or was fenced; Kafka's online downgrade when it was the last
        consumer-protocol member (``conversions.downgraded`` says whether it applies)."""
        classic = self._conversions.downgraded(fx, group, member.member_id)
        if classic is None:
            self.fence(fx, group, member)
            return
        for member_id in list(group.members):
            member_tombstones(fx, group.group_id, member_id)
            group.remove(member_id)
        self.delete(fx, group, keep_offsets=True)
        self._conversions.install(fx, classic)

    # -- describe, list, delete ------------------------------------------------------------
    def is_consumer_group(self, group_id: str) -> bool:
        """Whether ``group_id`` is a KIP-848 consumer group (not a classic one)."""
        return group_id in self._ctx.consumer_groups

    def describe(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe of one group; reads only."""
        group = self._ctx.consumer_groups.get(group_id)
        if group is None:
            classic = self._ctx.groups.get(group_id)
            message = (f"Group {group_id} is not a consumer group." if classic is not None
                       and not self._ctx.offsets_only(classic) else f"Group {group_id} not found.")
            return ConsumerGroupDescription(E.GROUP_ID_NOT_FOUND, message, group_id)
        members = tuple(ConsumerMemberDescription(
            m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            m.subscribed_topic_names, m.subscribed_topic_regex, dict(m.assigned), dict(group.target.get(m.member_id, {})),
            m.classic is not None)
            for m in group.members.values())
        return ConsumerGroupDescription(E.NONE, None, group_id, group.update_state().value, group.group_epoch,
                                        group.assignment_epoch, self._assignor_of(group), members)

    def delete(self, fx: Effects, group: ConsumerGroup, keep_offsets: bool = False) -> ErrorCode:
        """DeleteGroups of an Empty consumer group (its offsets too, unless ``keep_offsets``: a
        conversion to a classic group)."""
        if group.members:
            return E.NON_EMPTY_GROUP
        gid = group.group_id
        for record_type in (TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA):
            fx.append(Record(gid, consumer_key(record_type, gid), None))
        del self._ctx.consumer_groups[gid]
        fx.touch(gid)
        holder = self._ctx.groups.get(gid)
        if holder is not None and not keep_offsets:
            self._offsets.drop_group(fx, holder)
        return E.NONE


def subscription_metadata(group: ConsumerGroup, topics: Topics) -> Topics:
    """The topics (name -> (topic id, partitions)) some member of ``group`` subscribes to."""
    return {name: topics[name] for name in sorted(topics)
            if any(m.matches(name) for m in group.members.values())}


def member_record(group_id: str, m: ConsumerMember) -> Record:
    """Kafka's ConsumerGroupMemberMetadata record of ``m``."""
    return Record(group_id, consumer_key(MEMBER_METADATA, group_id, m.member_id), encode_member_metadata(
        MemberMetadata(m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
                       m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor, m.classic)))


def assignment_record(group_id: str, m: ConsumerMember) -> Record:
    """Kafka's ConsumerGroupCurrentMemberAssignment record of ``m``."""
    return Record(group_id, consumer_key(CURRENT_ASSIGNMENT, group_id, m.member_id), encode_current_assignment(
        CurrentAssignment(m.member_epoch, m.previous_member_epoch, int(m.state), m.assigned,
                          m.pending_revocation)))


def member_tombstones(fx: Effects, group_id: str, member_id: str) -> None:
    """The tombstones of a member that is gone: its assignment, target and metadata records."""
    for record_type in (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA):
        fx.append(Record(group_id, consumer_key(record_type, group_id, member_id), None))


def session_timeout_of(member: ConsumerMember, config: GroupConfig) -> int:
    """A classic member's session timeout is its JoinGroup's; the others have the broker's."""
    return member.classic.session_timeout_ms if member.classic is not None \
        else config.consumer.session_timeout_ms


def classic_timed_out(member: ConsumerMember, now_ms: int) -> bool:
    """A classic member told to rejoin (or that joined) did not rejoin (sync) within its rebalance timeout."""
    return any(at is not None and at <= now_ms for at in (member.join_deadline_ms, member.sync_deadline_ms))
