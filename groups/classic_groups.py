"""The classic-group manager: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance
(Kafka's classic protocol; ``GroupCoordinator`` routes those calls here for groups that are
not KIP-848 consumer groups, whose classic members ``mixed_groups`` serves).

The rules follow Apache Kafka's GroupCoordinator (the Scala one of 2.x-3.x, which the Java
``ClassicGroup`` of 4.x keeps).  Group states change only through ``Group.transition``,
which checks Kafka's table of valid transitions.  A group record is written when a
generation becomes Stable, when a group becomes Empty and when a static member takes a
new member id (``persistence.group_record``).  The timer events of a group (``timers``)
end here too: a pending member id or a session expires, the join or sync phase times out.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from .context import GroupContext
from .effects import Effects
from .group import Group, GroupState, Member
from .persistence import group_record
from .results import JoinRequest, JoinResult, LeaveResult, SyncRequest, SyncResult

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
SKIP_ASSIGNMENT_MIN_VERSION = 9      # JoinGroup v9 (KIP-814)
MEMBER_ID_REQUIRED_MIN_VERSION = 4   # JoinGroup v4 (KIP-394)


def answer_join(fx: Effects, member: Member, result: JoinResult) -> None:
    """Complete the member's parked JoinGroup requests with ``result``."""
    for ticket in member.join_tickets:
        fx.complete(ticket, result)
    member.join_tickets.clear()


def answer_sync(fx: Effects, member: Member, result: SyncResult) -> None:
    """Complete the member's parked SyncGroup requests with ``result``."""
    for ticket in member.sync_tickets:
        fx.complete(ticket, result)
    member.sync_tickets.clear()


class ClassicGroupManager:
    """The classic groups of ``ctx.groups``; each method that changes state takes the call's ``Effects``."""

    def __init__(self, ctx: GroupContext):
        self._ctx = ctx
        self._config = ctx.config

    # ------------------------------------------------------------------ JoinGroup
    def join_error(self, req: JoinRequest) -> ErrorCode | None:
        """The error of a JoinGroup whatever its group: no group id, or a session timeout out of bounds."""
        cfg = self._config
        if not req.group_id:
            return E.INVALID_GROUP_ID
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return E.INVALID_SESSION_TIMEOUT
        return None

    def join(self, fx: Effects, ticket: int, req: JoinRequest) -> None:
        """JoinGroup; the ticket is completed now or when the join phase of the group ends."""
        member_id = req.member_id
        group = self._ctx.groups.get(req.group_id) if req.group_id else None
        error = self.join_error(req)
        if error is not None:
            fx.complete(ticket, JoinResult(error, member_id=member_id))
            return
        if group is None and member_id:
            fx.complete(ticket, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        if group is None:
            group = self._ctx.create_group(fx, req.group_id)
        fx.touch(group.group_id)
        if not self._accept_joining(group, member_id):
            if member_id in group.members:
                self.remove_member(fx, group, group.members[member_id])
            fx.complete(ticket, JoinResult(E.GROUP_MAX_SIZE_REACHED))
        elif not member_id:
            self._join_new_member(fx, group, ticket, req)
        else:
            self._join_current_member(fx, group, ticket, req)
        self._try_complete_join(fx, group)

    def _accept_joining(self, group: Group, member_id: str) -> bool:
        max_size = self._config.max_size
        if group.is_(EMPTY):
            return True
        if group.is_(PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, fx: Effects, group: Group, ticket: int, req: JoinRequest) -> None:
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            fx.complete(ticket, JoinResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{req.group_instance_id if req.group_instance_id is not None else req.client_id}-{self._ctx.unique_id()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                self._update_static_member(fx, group, ticket, req, old_id, new_id)
            else:
                self._add_member_and_rebalance(fx, group, ticket, req, new_id)
        elif req.api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            group.pending_members[new_id] = fx.now_ms + req.session_timeout_ms
            fx.complete(ticket, JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(fx, group, ticket, req, new_id)

    def _join_current_member(self, fx: Effects, group: Group, ticket: int, req: JoinRequest) -> None:
        member_id = req.member_id
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            fx.complete(ticket, JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if member_id in group.pending_members and req.group_instance_id is None:
            del group.pending_members[member_id]
            self._add_member_and_rebalance(fx, group, ticket, req, member_id)
            return
        error = group.member_error(member_id, req.group_instance_id)
        if error is not None:
            fx.complete(ticket, JoinResult(error, member_id=member_id))
            return
        member = group.members[member_id]
        unchanged = member.protocols == list(req.protocols)
        if group.is_(PREPARING) or (group.is_(COMPLETING) and not unchanged) or (
                group.is_(STABLE) and (group.leader_id == member_id or not unchanged)):
            self._update_member(member, ticket, req)
            self._maybe_prepare_rebalance(fx, group)
        elif group.is_(COMPLETING, STABLE):
            # Same metadata (the client missed our answer): return the current generation.
            is_leader = group.is_(COMPLETING) and group.leader_id == member_id
            fx.complete(ticket, self._join_result(group, member, with_members=is_leader))
        else:
            fx.complete(ticket, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))

    @staticmethod
    def _update_member(member: Member, ticket: int, req: JoinRequest) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_tickets.append(ticket)

    def _add_member_and_rebalance(self, fx: Effects, group: Group, ticket: int, req: JoinRequest,
                                  member_id: str) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, list(req.protocols),
                        deadline_ms=fx.now_ms + self._config.new_member_join_timeout_ms, is_new=True,
                        join_tickets=[ticket])
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(fx, group)

    def _update_static_member(self, fx: Effects, group: Group, ticket: int, req: JoinRequest, old_id: str,
                              new_id: str) -> None:
        """A known group.instance.id rejoins with no member id: it takes over under a new id."""
        previous_leader = group.leader_id
        old = group.members[old_id]
        answer_join(fx, old, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        answer_sync(fx, old, SyncResult(E.FENCED_INSTANCE_ID))
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        member.deadline_ms = fx.now_ms + req.session_timeout_ms
        self._update_member(member, ticket, req)
        if group.is_(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(fx, group)
                return
            # No rebalance: persist the new member id and answer with the current generation.
            fx.append(group_record(group))
            if req.api_version >= SKIP_ASSIGNMENT_MIN_VERSION:
                is_leader = group.leader_id == new_id
                result = self._join_result(group, member, with_members=is_leader, skip_assignment=is_leader)
            else:
                # Old clients: name the previous leader id so this member does not run an assignment
                # a Stable group would ignore.
                result = self._join_result(group, member, with_members=False, leader_id=previous_leader)
            answer_join(fx, member, result)
        elif group.is_(COMPLETING):
            self.prepare_rebalance(fx, group)

    @staticmethod
    def _join_result(group: Group, member: Member, with_members: bool, skip_assignment: bool = False,
                     leader_id: str | None = None) -> JoinResult:
        members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                   for m in group.members.values()] if with_members else []
        return JoinResult(E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                          (leader_id if leader_id is not None else group.leader_id) or "", member.member_id,
                          skip_assignment, members)

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, fx: Effects, group: Group) -> None:
        if group.is_(STABLE, COMPLETING, EMPTY):
            self.prepare_rebalance(fx, group)

    def prepare_rebalance(self, fx: Effects, group: Group) -> None:
        now_ms = fx.now_ms
        if group.is_(COMPLETING):
            for member in group.members.values():
                member.assignment = b""
            self._propagate_sync(fx, group, E.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        delay = self._config.initial_rebalance_delay_ms
        if group.is_(EMPTY):
            group.join_deadline_ms = now_ms + delay
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
        group.transition(PREPARING, now_ms)
        fx.touch(group.group_id)
        self._try_complete_join(fx, group)

    def _try_complete_join(self, fx: Effects, group: Group) -> None:
        # The initial delay is never cut short (Kafka's InitialDelayedJoin): it waits for more members.
        if group.is_(PREPARING) and group.initial_delay_remaining_ms is None and group.all_members_joined():
            self._complete_join(fx, group)

    def on_join_deadline(self, fx: Effects, group: Group) -> None:
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self._config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.join_deadline_ms = fx.now_ms + delay
        else:
            self._complete_join(fx, group)

    def _complete_join(self, fx: Effects, group: Group) -> None:
        now_ms = fx.now_ms
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                answer_sync(fx, member, SyncResult(E.UNKNOWN_MEMBER_ID))
                group.remove(member.member_id)
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        if group.members and not self._elect_joined_leader(group):
            # Only static members that have not rejoined: wait for them or their session expiry.
            group.join_deadline_ms = now_ms + max(group.rebalance_timeout_ms(), 1)
            return
        group.join_deadline_ms = None
        group.generation_id += 1
        fx.touch(group.group_id)
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = None
            group.transition(EMPTY, now_ms)
            fx.append(group_record(group))
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(COMPLETING, now_ms)
        for member in group.members.values():
            is_leader = group.leader_id == member.member_id
            answer_join(fx, member, self._join_result(group, member, with_members=is_leader))
            member.deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    @staticmethod
    def _elect_joined_leader(group: Group) -> bool:
        leader = group.members.get(group.leader_id) if group.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in group.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        group.leader_id = joined.member_id
        return True

    def remove_member(self, fx: Effects, group: Group, member: Member) -> None:
        answer_join(fx, member, JoinResult(E.UNKNOWN_MEMBER_ID))
        answer_sync(fx, member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        fx.touch(group.group_id)
        if group.is_(STABLE, COMPLETING):
            self._maybe_prepare_rebalance(fx, group)
        elif group.is_(PREPARING):
            self._try_complete_join(fx, group)

    def _propagate_sync(self, fx: Effects, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.sync_tickets:
                if error is E.NONE:
                    result = SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment)
                else:
                    result = SyncResult(error)
                answer_sync(fx, member, result)
                member.deadline_ms = fx.now_ms + member.session_timeout_ms

    # ------------------------------------------------------------------ SyncGroup
    def sync(self, fx: Effects, ticket: int, req: SyncRequest) -> None:
        """SyncGroup; a follower's ticket waits for the leader's SyncGroup of the generation."""
        group, error = self._check_generation(req.group_id, req.member_id, req.group_instance_id,
                                              req.generation_id)
        if group is not None and error is None:
            if req.protocol_type is not None and req.protocol_type != group.protocol_type:
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif req.protocol_name is not None and req.protocol_name != group.protocol_name:
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif group.is_(EMPTY):
                error = E.UNKNOWN_MEMBER_ID
            elif group.is_(PREPARING):
                error = E.REBALANCE_IN_PROGRESS
        if error is not None:
            fx.complete(ticket, SyncResult(error))
            return
        fx.touch(group.group_id)
        member = group.members[req.member_id]
        group.pending_sync.discard(req.member_id)
        if group.is_(STABLE):
            fx.complete(ticket, SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            member.deadline_ms = fx.now_ms + member.session_timeout_ms
            return
        member.sync_tickets.append(ticket)
        if group.leader_id == req.member_id:
            given = dict(req.assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            group.transition(STABLE, fx.now_ms)
            fx.append(group_record(group))
            self._propagate_sync(fx, group, E.NONE)

    def _check_generation(self, group_id: str, member_id: str, group_instance_id: str | None,
                          generation_id: int) -> tuple[Group | None, ErrorCode | None]:
        """The group and the first error of the checks SyncGroup and Heartbeat share:
        a valid group id, a known (unfenced) member, the current generation."""
        if not group_id:
            return None, E.INVALID_GROUP_ID
        group = self._ctx.groups.get(group_id)
        if group is None:
            return None, E.UNKNOWN_MEMBER_ID
        error = group.member_error(member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        return group, error

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup
    def heartbeat(self, fx: Effects, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> ErrorCode:
        """Heartbeat; a valid one pushes the member's session deadline back."""
        group, error = self._check_generation(group_id, member_id, group_instance_id, generation_id)
        if group is not None and error is None:
            if group.is_(EMPTY):
                error = E.UNKNOWN_MEMBER_ID
            else:
                member = group.members[member_id]
                member.deadline_ms = fx.now_ms + member.session_timeout_ms
                fx.touch(group_id)
                # Kafka answers NONE while CompletingRebalance: the member has its JoinGroup answer.
                error = E.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else E.NONE
        return error

    def leave(self, fx: Effects, group_id: str, members: list[tuple[str | None, str | None, str | None]]
              ) -> LeaveResult:
        """LeaveGroup (a batch from v3) of (member_id, group_instance_id, reason)."""
        group = self._ctx.groups.get(group_id) if group_id else None
        if not group_id:
            return LeaveResult(E.INVALID_GROUP_ID, [])
        if group is None:
            return LeaveResult(E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members))
        fx.touch(group_id)
        return LeaveResult(E.NONE, [self._leave_one(fx, group, member_id or "", instance_id)
                                    for member_id, instance_id, _reason in members])

    def _leave_one(self, fx: Effects, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if not member_id:
            # Administrative removal of a static member by its instance id.
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            self.remove_member(fx, group, group.members[current])
            return E.NONE
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._try_complete_join(fx, group)
            return E.NONE
        error = group.member_error(member_id, instance_id)
        if error is not None:
            return error
        self.remove_member(fx, group, group.members[member_id])
        return E.NONE

    # ------------------------------------------------------------------ timer events
    def expire_pending(self, fx: Effects, group: Group, member_id: str) -> None:
        """A member id handed out with MEMBER_ID_REQUIRED was not used in time."""
        del group.pending_members[member_id]
        self._try_complete_join(fx, group)

    def on_sync_deadline(self, fx: Effects, group: Group) -> None:
        """Members that never sent SyncGroup within the rebalance timeout are removed."""
        for member_id in [m for m in group.members if m in group.pending_sync]:
            member = group.members[member_id]
            answer_sync(fx, member, SyncResult(E.UNKNOWN_MEMBER_ID))
            group.remove(member_id)
        self.prepare_rebalance(fx, group)
