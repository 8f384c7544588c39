"""Kafka's classic group coordinator, sans-I/O.

Every call takes the time (``now_ms``) and returns its own ``Outcome``: the
records to append to ``__consumer_offsets``, the responses of parked
requests it completed (by the caller's ticket), its own answer and when
``tick`` next has work.  Each call collects these in a local ``Effects`` and
returns them at its one exit (``_finish``).  Start-up state is rebuilt by
``replay`` of those records.  Group states change only through
``Group.transition``, which checks Kafka's table of valid transitions.

The rules follow Apache Kafka's GroupCoordinator (the Scala one of 2.x-3.x,
which the Java ``ClassicGroup`` of 4.x keeps): see the docstrings for where
kwire deliberately differs.  No method raises for bad client input; errors
are ``ErrorCode`` values in the results.
"""
from __future__ import annotations

import functools
import heapq
import uuid

from kwire.codecs.errors import ErrorCode

from .admin import AdminMixin
from .consumer_coordinator import ConsumerGroupsMixin
from .effects import Effects
from .group import Group, GroupState, Member
from .mixed_groups import MixedGroupsMixin
from .offsets import OffsetsMixin
from .persistence import PersistenceMixin
from .records import parse_subscription
from .results import (
    GroupConfig, GroupDescription, JoinRequest, JoinResult, LeaveResult, OffsetCommit, Outcome, Record,
    SyncRequest, SyncResult,
)
from .timers import TimersMixin

__all__ = ["GroupConfig", "GroupCoordinator", "GroupDescription", "JoinRequest", "JoinResult", "LeaveResult",
           "OffsetCommit", "Outcome", "Record", "SyncRequest", "SyncResult", "parse_subscription",
           "partition_for"]

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
SKIP_ASSIGNMENT_MIN_VERSION = 9      # JoinGroup v9 (KIP-814)
MEMBER_ID_REQUIRED_MIN_VERSION = 4   # JoinGroup v4 (KIP-394)


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % num_partitions`` (Java's String.hashCode over UTF-16)."""
    if len(group_id) <= _CACHED_ID_CHARS:
        return _cached_hash(group_id) % num_partitions
    return java_string_hash(group_id) % num_partitions


def java_string_hash(text: str) -> int:
    """``Utils.abs(text.hashCode())``."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h & 0x7FFFFFFF


# The same group and transactional ids come back on every request, and the loop above costs
# microseconds per id; the cache holds at most 4096 ids of at most 255 characters (a few MB at most).
_CACHED_ID_CHARS = 255
_cached_hash = functools.lru_cache(maxsize=4096)(java_string_hash)


class GroupCoordinator(TimersMixin, PersistenceMixin, AdminMixin, OffsetsMixin, ConsumerGroupsMixin,
                       MixedGroupsMixin):
    """All classic and KIP-848 consumer groups of this broker; one instance, driven by one task (not thread-safe)."""

    def __init__(self, config: GroupConfig | None = None, unique_id=None):
        """``unique_id()`` makes the suffix of new member ids (a UUID4; tests pass a counter)."""
        self.config = config or GroupConfig()
        self._unique_id = unique_id or (lambda: str(uuid.uuid4()))
        self._groups: dict[str, Group] = {}
        self._heap: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._stale: set[str] = set()         # replayed groups whose timers are not scheduled yet
        self._unscheduled: set[str] = set()   # replayed groups whose members have no session deadline
        self._consumer_groups: dict = {}      # KIP-848 consumer groups (consumer_coordinator)
        self._consumer_unscheduled: set[str] = set()

    # ------------------------------------------------------------------ one call: begin, finish
    def _begin(self, now_ms: int) -> Effects:
        fx = Effects(now_ms)
        for group_id in self._unscheduled:
            group = self._groups.get(group_id)
            for member in group.members.values() if group else ():
                if member.deadline_ms is None:
                    member.deadline_ms = now_ms + member.session_timeout_ms
            fx.touch(group_id)
        self._unscheduled.clear()
        self._consumer_begin(fx)
        return fx

    def _finish(self, fx: Effects, result=None) -> Outcome:
        """The one exit of every public call: run the due timers of the groups it touched, reschedule."""
        for group_id in sorted(fx.touched):
            group = self._groups.get(group_id)
            if group is not None:
                self._run_due(fx, group)
        self._reschedule(fx.touched)
        return Outcome(fx.records, fx.completed, result, self.next_deadline_ms())

    def _reschedule(self, group_ids) -> None:
        for group_id in group_ids:
            group = self._groups.get(group_id)
            event = self._next_event(group) if group is not None else None
            if event is None:
                self._scheduled.pop(group_id, None)
            elif self._scheduled.get(group_id) != event[0]:
                self._scheduled[group_id] = event[0]
                heapq.heappush(self._heap, (event[0], group_id))
        if len(self._heap) > 2 * len(self._scheduled) + 64:
            self._heap = [(at, g) for g, at in self._scheduled.items()]
            heapq.heapify(self._heap)

    @staticmethod
    def _answer_join(fx: Effects, member: Member, result: JoinResult) -> None:
        for ticket in member.join_tickets:
            fx.complete(ticket, result)
        member.join_tickets.clear()

    @staticmethod
    def _answer_sync(fx: Effects, member: Member, result: SyncResult) -> None:
        for ticket in member.sync_tickets:
            fx.complete(ticket, result)
        member.sync_tickets.clear()

    def _create(self, fx: Effects, group_id: str) -> Group:
        group = Group(group_id, state_timestamp=fx.now_ms)
        self._groups[group_id] = group
        fx.touch(group_id)
        return group

    # ------------------------------------------------------------------ JoinGroup
    def join_group(self, ticket: int, req: JoinRequest, now_ms: int, topics: dict | None = None) -> Outcome:
        """JoinGroup; the ticket is completed now or when the join phase of the group ends.
        ``topics`` (name -> (topic id, partitions)) serves a classic member of a consumer group."""
        fx = self._begin(now_ms)
        self._join(fx, ticket, req, topics)
        return self._finish(fx)

    def _join(self, fx: Effects, ticket: int, req: JoinRequest, topics: dict | None = None) -> None:
        cfg = self.config
        member_id = req.member_id
        group = self._groups.get(req.group_id) if req.group_id else None
        if not req.group_id:
            fx.complete(ticket, JoinResult(E.INVALID_GROUP_ID, member_id=member_id))
        elif not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            fx.complete(ticket, JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id))
        elif req.group_id in self._consumer_groups and self._consumer_groups[req.group_id].members:
            # A mixed group: the caller becomes a classic member of the consumer group.
            self._classic_join_to_consumer(fx, ticket, req, self._consumer_groups[req.group_id], topics)
        elif group is None and member_id:
            fx.complete(ticket, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
        else:
            if req.group_id in self._consumer_groups:      # empty: it becomes a classic group
                self._delete_consumer_group(fx, self._consumer_groups[req.group_id], keep_offsets=True)
                group = self._groups.get(req.group_id)
            if group is None:
                group = self._create(fx, req.group_id)
            fx.touch(group.group_id)
            if not self._accept_joining(group, member_id):
                if member_id in group.members:
                    self._remove_member_and_update(fx, group, group.members[member_id])
                fx.complete(ticket, JoinResult(E.GROUP_MAX_SIZE_REACHED))
            elif not member_id:
                self._join_new_member(fx, group, ticket, req)
            else:
                self._join_current_member(fx, group, ticket, req)
            self._try_complete_join(fx, group)

    def _accept_joining(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
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
        new_id = f"{req.group_instance_id if req.group_instance_id is not None else req.client_id}-{self._unique_id()}"
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
        error = self._validate_member(group, member_id, req.group_instance_id)
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
                        deadline_ms=fx.now_ms + self.config.new_member_join_timeout_ms, is_new=True,
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
        self._answer_join(fx, old, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        self._answer_sync(fx, old, SyncResult(E.FENCED_INSTANCE_ID))
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        member.deadline_ms = fx.now_ms + req.session_timeout_ms
        self._update_member(member, ticket, req)
        if group.is_(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(fx, group)
                return
            # No rebalance: persist the new member id and answer with the current generation.
            self._store_group(fx, group)
            if req.api_version >= SKIP_ASSIGNMENT_MIN_VERSION:
                is_leader = group.leader_id == new_id
                result = self._join_result(group, member, with_members=is_leader, skip_assignment=is_leader)
            else:
                # Old clients: name the previous leader id so this member does not run an assignment
                # a Stable group would ignore.
                result = self._join_result(group, member, with_members=False, leader_id=previous_leader)
            self._answer_join(fx, member, result)
        elif group.is_(COMPLETING):
            self._prepare_rebalance(fx, group)

    @staticmethod
    def _join_result(group: Group, member: Member, with_members: bool, skip_assignment: bool = False,
                     leader_id: str | None = None) -> JoinResult:
        members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                   for m in group.members.values()] if with_members else []
        return JoinResult(E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                          (leader_id if leader_id is not None else group.leader_id) or "", member.member_id,
                          skip_assignment, members)

    @staticmethod
    def _validate_member(group: Group, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        if group_instance_id is not None:
            current = group.static_member_id(group_instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        return None

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, fx: Effects, group: Group) -> None:
        if group.is_(STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(fx, group)

    def _prepare_rebalance(self, fx: Effects, group: Group) -> None:
        now_ms = fx.now_ms
        if group.is_(COMPLETING):
            for member in group.members.values():
                member.assignment = b""
            self._propagate_sync(fx, group, E.REBALANCE_IN_PROGRESS)
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        delay = self.config.initial_rebalance_delay_ms
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

    def _on_join_deadline(self, fx: Effects, group: Group) -> None:
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.join_deadline_ms = fx.now_ms + delay
        else:
            self._complete_join(fx, group)

    def _complete_join(self, fx: Effects, group: Group) -> None:
        now_ms = fx.now_ms
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                self._answer_sync(fx, member, SyncResult(E.UNKNOWN_MEMBER_ID))
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
            self._store_group(fx, group)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(COMPLETING, now_ms)
        for member in group.members.values():
            is_leader = group.leader_id == member.member_id
            self._answer_join(fx, member, self._join_result(group, member, with_members=is_leader))
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

    def _remove_member_and_update(self, fx: Effects, group: Group, member: Member) -> None:
        self._answer_join(fx, member, JoinResult(E.UNKNOWN_MEMBER_ID))
        self._answer_sync(fx, member, SyncResult(E.UNKNOWN_MEMBER_ID))
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
                self._answer_sync(fx, member, result)
                member.deadline_ms = fx.now_ms + member.session_timeout_ms

    # ------------------------------------------------------------------ SyncGroup
    def sync_group(self, ticket: int, req: SyncRequest, now_ms: int) -> Outcome:
        """SyncGroup; a follower's ticket waits for the leader's SyncGroup of the generation."""
        fx = self._begin(now_ms)
        self._sync(fx, ticket, req)
        return self._finish(fx)

    def _sync(self, fx: Effects, ticket: int, req: SyncRequest) -> None:
        consumer = self._consumer_groups.get(req.group_id)
        if consumer is not None and consumer.members:
            self._classic_sync_to_consumer(fx, ticket, req, consumer)
            return
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
            self._store_group(fx, group)
            self._propagate_sync(fx, group, E.NONE)

    def _check_generation(self, group_id: str, member_id: str, group_instance_id: str | None,
                          generation_id: int) -> tuple[Group | None, ErrorCode | None]:
        """The group and the first error of the checks SyncGroup and Heartbeat share:
        a valid group id, a known (unfenced) member, the current generation."""
        if not group_id:
            return None, E.INVALID_GROUP_ID
        group = self._groups.get(group_id)
        if group is None:
            return None, E.UNKNOWN_MEMBER_ID
        error = self._validate_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        return group, error

    # ------------------------------------------------------------------ Heartbeat, LeaveGroup
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                  now_ms: int) -> Outcome:
        """Heartbeat; ``result`` is its ErrorCode.  A valid one pushes the member's session deadline back."""
        fx = self._begin(now_ms)
        consumer = self._consumer_groups.get(group_id)
        if consumer is not None and consumer.members:
            return self._finish(fx, self._classic_heartbeat_to_consumer(fx, consumer, generation_id, member_id,
                                                                        group_instance_id))
        group, error = self._check_generation(group_id, member_id, group_instance_id, generation_id)
        if group is not None and error is None:
            if group.is_(EMPTY):
                error = E.UNKNOWN_MEMBER_ID
            else:
                member = group.members[member_id]
                member.deadline_ms = now_ms + member.session_timeout_ms
                fx.touch(group_id)
                # Kafka answers NONE while CompletingRebalance: the member has its JoinGroup answer.
                error = E.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else E.NONE
        return self._finish(fx, error)

    def leave_group(self, group_id: str, members: list[tuple[str | None, str | None, str | None]],
                    now_ms: int) -> Outcome:
        """LeaveGroup (a batch from v3) of (member_id, group_instance_id, reason);
        ``result`` is a LeaveResult with one error per member."""
        fx = self._begin(now_ms)
        group = self._groups.get(group_id) if group_id else None
        consumer = self._consumer_groups.get(group_id)
        if not group_id:
            result = LeaveResult(E.INVALID_GROUP_ID, [])
        elif consumer is not None:
            result = LeaveResult(E.NONE, [self._classic_leave_to_consumer(fx, consumer, member_id or "", instance_id)
                                          for member_id, instance_id, _reason in members])
        elif group is None:
            result = LeaveResult(E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members))
        else:
            fx.touch(group_id)
            result = LeaveResult(E.NONE, [self._leave_one(fx, group, member_id or "", instance_id)
                                          for member_id, instance_id, _reason in members])
        return self._finish(fx, result)

    def _leave_one(self, fx: Effects, group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        if not member_id:
            # Administrative removal of a static member by its instance id.
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            self._remove_member_and_update(fx, group, group.members[current])
            return E.NONE
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._try_complete_join(fx, group)
            return E.NONE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._remove_member_and_update(fx, group, group.members[member_id])
        return E.NONE

    @staticmethod
    def partition_for(group_id: str, num_partitions: int) -> int:
        return partition_for(group_id, num_partitions)
