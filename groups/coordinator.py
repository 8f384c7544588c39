"""Kafka's classic group coordinator, sans-I/O.

Every call takes the time (``now_ms``) and returns what it decided: the
responses it can give now, the responses of parked requests it completed (by
the caller's ticket), and the records to append to ``__consumer_offsets``.
Start-up state is rebuilt by ``replay`` of those records.  Timers are plain
deadlines: ``next_deadline_ms`` says when ``tick`` next has work.

The rules follow Apache Kafka's GroupCoordinator (the Scala one of 2.x-3.x,
which the Java ``ClassicGroup`` of 4.x keeps): see the docstrings for where
kwire deliberately differs.  No method raises for bad client input; errors
are ``ErrorCode`` values in the results.
"""
from __future__ import annotations

import heapq
import uuid

from kwire.codecs.errors import ErrorCode

from .admin import AdminMixin
from .group import Group, GroupState, Member, OffsetEntry
from .records import OffsetValue, encode_offset_value, offset_key, parse_subscription
from .persistence import PersistenceMixin
from .results import (
    GroupConfig, GroupDescription, JoinResult, LeaveResult, OffsetCommit, Outcome, Record, SyncResult,
)
from .timers import TimersMixin

__all__ = ["GroupConfig", "GroupCoordinator", "GroupDescription", "JoinResult", "LeaveResult", "OffsetCommit",
           "Outcome", "Record", "SyncResult", "parse_subscription", "partition_for"]

E = ErrorCode
EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
SKIP_ASSIGNMENT_MIN_VERSION = 9      # JoinGroup v9 (KIP-814)
MEMBER_ID_REQUIRED_MIN_VERSION = 4   # JoinGroup v4 (KIP-394)


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % num_partitions`` (Java's String.hashCode over UTF-16)."""
    h = 0
    data = group_id.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % num_partitions


class GroupCoordinator(TimersMixin, PersistenceMixin, AdminMixin):
    """All classic groups of this broker; one instance, driven by one task (not thread-safe)."""

    def __init__(self, config: GroupConfig | None = None, unique_id=None):
        """``unique_id()`` makes the suffix of new member ids (a UUID4; tests pass a counter)."""
        self.config = config or GroupConfig()
        self._unique_id = unique_id or (lambda: str(uuid.uuid4()))
        self._groups: dict[str, Group] = {}
        self._heap: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._unscheduled: set[str] = set()
        self._out = Outcome()

    # ------------------------------------------------------------------ plumbing
    def _call(self, now_ms: int | None) -> None:
        self._out = Outcome()
        if self._unscheduled and now_ms is not None:
            for group_id in self._unscheduled:
                group = self._groups.get(group_id)
                for member in group.members.values() if group else ():
                    if member.deadline_ms is None:
                        member.deadline_ms = now_ms + member.session_timeout_ms
                self._dirty.add(group_id)
            self._unscheduled.clear()

    def _done(self, now_ms: int, result=None, run_due: bool = True) -> Outcome:
        if run_due:
            for group_id in list(self._dirty):
                group = self._groups.get(group_id)
                if group is not None:
                    self._run_due(group, now_ms)
        self._reschedule()
        out, self._out = self._out, Outcome()
        out.result = result
        return out

    def _mark(self, group: Group) -> None:
        self._dirty.add(group.group_id)

    def _reschedule(self) -> None:
        for group_id in self._dirty:
            group = self._groups.get(group_id)
            event = self._next_event(group) if group is not None else None
            if event is None:
                self._scheduled.pop(group_id, None)
            elif self._scheduled.get(group_id) != event[0]:
                self._scheduled[group_id] = event[0]
                heapq.heappush(self._heap, (event[0], group_id))
        self._dirty.clear()
        if len(self._heap) > 2 * len(self._scheduled) + 64:
            self._heap = [(at, g) for g, at in self._scheduled.items()]
            heapq.heapify(self._heap)

    def _complete(self, ticket: int, result) -> None:
        self._out.completed.append((ticket, result))

    def _answer_join(self, member: Member, result: JoinResult) -> None:
        for ticket in member.join_tickets:
            self._complete(ticket, result)
        member.join_tickets.clear()

    def _answer_sync(self, member: Member, result: SyncResult) -> None:
        for ticket in member.sync_tickets:
            self._complete(ticket, result)
        member.sync_tickets.clear()

    def _create(self, group_id: str, now_ms: int) -> Group:
        group = Group(group_id, state_timestamp=now_ms)
        self._groups[group_id] = group
        self._mark(group)
        return group

    # ------------------------------------------------------------------ JoinGroup
    def join_group(self, ticket: int, group_id: str, member_id: str, group_instance_id: str | None,
                   protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                   rebalance_timeout_ms: int, client_id: str, client_host: str, api_version: int,
                   reason: str | None, now_ms: int) -> Outcome:
        """JoinGroup; the ticket is completed now or when the join phase of the group ends."""
        self._call(now_ms)
        member_id = member_id or ""
        protocols = [(str(name), bytes(metadata or b"")) for name, metadata in protocols or ()]
        req = _JoinRequest(ticket, member_id, group_instance_id, protocol_type or "", protocols,
                           session_timeout_ms, rebalance_timeout_ms, client_id or "", client_host or "",
                           api_version)
        cfg = self.config
        group = self._groups.get(group_id) if group_id else None
        if not group_id:
            self._complete(ticket, JoinResult(E.INVALID_GROUP_ID, member_id=member_id))
        elif not cfg.min_session_timeout_ms <= session_timeout_ms <= cfg.max_session_timeout_ms:
            self._complete(ticket, JoinResult(E.INVALID_SESSION_TIMEOUT, member_id=member_id))
        elif group is None and member_id:
            self._complete(ticket, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))
        else:
            if group is None:
                group = self._create(group_id, now_ms)
            self._mark(group)
            if not self._accept_joining(group, member_id):
                if member_id in group.members:
                    self._remove_member_and_update(group, group.members[member_id], now_ms)
                self._complete(ticket, JoinResult(E.GROUP_MAX_SIZE_REACHED))
            elif not member_id:
                self._join_new_member(group, req, now_ms)
            else:
                self._join_current_member(group, req, now_ms)
            self._try_complete_join(group, now_ms)
        return self._done(now_ms)

    def _accept_joining(self, group: Group, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_(EMPTY):
            return True
        if group.is_(PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: Group, req: "_JoinRequest", now_ms: int) -> None:
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            self._complete(req.ticket, JoinResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{req.group_instance_id if req.group_instance_id is not None else req.client_id}-{self._unique_id()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                self._update_static_member(group, req, old_id, new_id, now_ms)
            else:
                self._add_member_and_rebalance(group, req, new_id, now_ms)
        elif req.api_version >= MEMBER_ID_REQUIRED_MIN_VERSION:
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            self._complete(req.ticket, JoinResult(E.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, now_ms)

    def _join_current_member(self, group: Group, req: "_JoinRequest", now_ms: int) -> None:
        member_id = req.member_id
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            self._complete(req.ticket, JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if member_id in group.pending_members and req.group_instance_id is None:
            del group.pending_members[member_id]
            self._add_member_and_rebalance(group, req, member_id, now_ms)
            return
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is not None:
            self._complete(req.ticket, JoinResult(error, member_id=member_id))
            return
        member = group.members[member_id]
        unchanged = member.protocols == req.protocols
        if group.is_(PREPARING) or (group.is_(COMPLETING) and not unchanged) or (
                group.is_(STABLE) and (group.leader_id == member_id or not unchanged)):
            self._update_member(member, req)
            self._maybe_prepare_rebalance(group, now_ms)
        elif group.is_(COMPLETING, STABLE):
            # Same metadata (the client missed our answer): return the current generation.
            is_leader = group.is_(COMPLETING) and group.leader_id == member_id
            self._complete(req.ticket, self._join_result(group, member, with_members=is_leader))
        else:
            self._complete(req.ticket, JoinResult(E.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _update_member(self, member: Member, req: "_JoinRequest") -> None:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_tickets.append(req.ticket)

    def _add_member_and_rebalance(self, group: Group, req: "_JoinRequest", member_id: str, now_ms: int) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type, req.protocols,
                        deadline_ms=now_ms + self.config.new_member_join_timeout_ms, is_new=True,
                        join_tickets=[req.ticket])
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._maybe_prepare_rebalance(group, now_ms)

    def _update_static_member(self, group: Group, req: "_JoinRequest", old_id: str, new_id: str,
                              now_ms: int) -> None:
        """A known group.instance.id rejoins with no member id: it takes over under a new id."""
        previous_leader = group.leader_id
        old = group.members[old_id]
        self._answer_join(old, JoinResult(E.FENCED_INSTANCE_ID, member_id=old_id))
        self._answer_sync(old, SyncResult(E.FENCED_INSTANCE_ID))
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        member.deadline_ms = now_ms + req.session_timeout_ms
        self._update_member(member, req)
        if group.is_(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, now_ms)
                return
            # No rebalance: persist the new member id and answer with the current generation.
            self._store_group(group)
            if req.api_version >= SKIP_ASSIGNMENT_MIN_VERSION:
                is_leader = group.leader_id == new_id
                result = self._join_result(group, member, with_members=is_leader, skip_assignment=is_leader)
            else:
                # Old clients: name the previous leader id so this member does not run an assignment
                # a Stable group would ignore.
                result = self._join_result(group, member, with_members=False, leader_id=previous_leader)
            self._answer_join(member, result)
        elif group.is_(COMPLETING):
            self._prepare_rebalance(group, now_ms)

    def _join_result(self, group: Group, member: Member, with_members: bool, skip_assignment: bool = False,
                     leader_id: str | None = None) -> JoinResult:
        members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                   for m in group.members.values()] if with_members else []
        return JoinResult(E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                          (leader_id if leader_id is not None else group.leader_id) or "", member.member_id,
                          skip_assignment, members)

    def _validate_member(self, group: Group, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
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
    def _maybe_prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_(STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: Group, now_ms: int) -> None:
        if group.is_(COMPLETING):
            for member in group.members.values():
                member.assignment = b""
            self._propagate_sync(group, E.REBALANCE_IN_PROGRESS, now_ms)
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
        self._mark(group)
        self._try_complete_join(group, now_ms)

    def _try_complete_join(self, group: Group, now_ms: int) -> None:
        # The initial delay is never cut short (Kafka's InitialDelayedJoin): it waits for more members.
        if group.is_(PREPARING) and group.initial_delay_remaining_ms is None and group.all_members_joined():
            self._complete_join(group, now_ms)

    def _on_join_deadline(self, group: Group, now_ms: int) -> None:
        remaining = group.initial_delay_remaining_ms
        if remaining is not None and group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.join_deadline_ms = now_ms + delay
        else:
            self._complete_join(group, now_ms)

    def _complete_join(self, group: Group, now_ms: int) -> None:
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                self._answer_sync(member, SyncResult(E.UNKNOWN_MEMBER_ID))
                group.remove(member.member_id)
        group.initial_delay_remaining_ms = None
        group.new_member_added = False
        if group.members and not self._elect_joined_leader(group):
            # Only static members that have not rejoined: wait for them or their session expiry.
            group.join_deadline_ms = now_ms + max(group.rebalance_timeout_ms(), 1)
            return
        group.join_deadline_ms = None
        group.generation_id += 1
        self._mark(group)
        if not group.members:
            group.protocol_name = None
            group.subscribed_topics = None
            group.transition(EMPTY, now_ms)
            self._store_group(group)
            return
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        group.transition(COMPLETING, now_ms)
        for member in group.members.values():
            self._answer_join(member, self._join_result(group, member, with_members=group.leader_id == member.member_id))
            member.deadline_ms = now_ms + member.session_timeout_ms
            member.is_new = False
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    def _elect_joined_leader(self, group: Group) -> bool:
        leader = group.members.get(group.leader_id) if group.leader_id else None
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in group.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        group.leader_id = joined.member_id
        return True

    def _remove_member_and_update(self, group: Group, member: Member, now_ms: int) -> None:
        self._answer_join(member, JoinResult(E.UNKNOWN_MEMBER_ID))
        self._answer_sync(member, SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._mark(group)
        if group.is_(STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, now_ms)
        elif group.is_(PREPARING):
            self._try_complete_join(group, now_ms)

    def _propagate_sync(self, group: Group, error: ErrorCode, now_ms: int) -> None:
        for member in group.members.values():
            if member.sync_tickets:
                if error is E.NONE:
                    result = SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment)
                else:
                    result = SyncResult(error)
                self._answer_sync(member, result)
                member.deadline_ms = now_ms + member.session_timeout_ms

    # ------------------------------------------------------------------ SyncGroup
    def sync_group(self, ticket: int, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                   assignments: list[tuple[str, bytes]], now_ms: int) -> Outcome:
        """SyncGroup; a follower's ticket waits for the leader's SyncGroup of the generation."""
        self._call(now_ms)
        group, error = self._check_generation(group_id, member_id, group_instance_id, generation_id)
        if group is not None:
            if error is None and protocol_type is not None and protocol_type != group.protocol_type:
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif error is None and protocol_name is not None and protocol_name != group.protocol_name:
                error = E.INCONSISTENT_GROUP_PROTOCOL
            elif error is None and group.is_(EMPTY):
                error = E.UNKNOWN_MEMBER_ID
            elif error is None and group.is_(PREPARING):
                error = E.REBALANCE_IN_PROGRESS
        if error is not None:
            self._complete(ticket, SyncResult(error))
            return self._done(now_ms)
        self._mark(group)
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        if group.is_(STABLE):
            self._complete(ticket, SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            member.deadline_ms = now_ms + member.session_timeout_ms
        else:
            member.sync_tickets.append(ticket)
            if group.leader_id == member_id:
                given = {mid: bytes(a or b"") for mid, a in assignments or ()}
                for m in group.members.values():
                    m.assignment = given.get(m.member_id, b"")
                group.transition(STABLE, now_ms)
                self._store_group(group)
                self._propagate_sync(group, E.NONE, now_ms)
        return self._done(now_ms)

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
                  now_ms: int) -> ErrorCode:
        """Heartbeat; a valid one pushes the member's session deadline back."""
        self._call(now_ms)
        group, error = self._check_generation(group_id, member_id, group_instance_id, generation_id)
        if group is not None:
            if error is None and group.is_(EMPTY):
                error = E.UNKNOWN_MEMBER_ID
            elif error is None:
                member = group.members[member_id]
                member.deadline_ms = now_ms + member.session_timeout_ms
                self._mark(group)
                # Kafka answers NONE while CompletingRebalance: the member has its JoinGroup answer.
                error = E.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else E.NONE
        self._done(now_ms, run_due=False)
        return error

    def leave_group(self, group_id: str, members: list[tuple[str | None, str | None, str | None]],
                    now_ms: int) -> Outcome:
        """LeaveGroup (a batch from v3); ``result`` is a LeaveResult with one error per member."""
        self._call(now_ms)
        group = self._groups.get(group_id) if group_id else None
        if not group_id:
            return self._done(now_ms, LeaveResult(E.INVALID_GROUP_ID, []))
        if group is None:
            return self._done(now_ms, LeaveResult(E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)))
        self._mark(group)
        return self._done(now_ms, LeaveResult(E.NONE, [self._leave_one(group, member_id or "", instance_id, now_ms)
                                                        for member_id, instance_id, _reason in members]))

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None, now_ms: int) -> ErrorCode:
        if not member_id:
            # Administrative removal of a static member by its instance id.
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            self._remove_member_and_update(group, group.members[current], now_ms)
            return E.NONE
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._try_complete_join(group, now_ms)
            return E.NONE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._remove_member_and_update(group, group.members[member_id], now_ms)
        return E.NONE

    # ------------------------------------------------------------------ offsets
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: list[OffsetCommit], now_ms: int) -> Outcome:
        """OffsetCommit; ``result`` is one ErrorCode per entry of ``offsets``, in order."""
        self._call(now_ms)
        member_id = member_id or ""
        group = self._groups.get(group_id) if group_id is not None else None
        if group_id is None:
            error: ErrorCode | None = E.INVALID_GROUP_ID
        elif group is None and generation_id >= 0:
            error = E.ILLEGAL_GENERATION
        else:
            if group is None:
                group = self._create(group_id, now_ms)   # a "simple" group: offsets only
            error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
            if error is None and group.is_(COMPLETING):
                error = E.REBALANCE_IN_PROGRESS
        if error is not None:
            return self._done(now_ms, [error] * len(offsets))
        if group.is_(STABLE, PREPARING) and member_id in group.members:
            member = group.members[member_id]
            member.deadline_ms = now_ms + member.session_timeout_ms
        self._mark(group)
        return self._done(now_ms, [self._store_offset(group, o, now_ms) for o in offsets])

    def _validate_offset_commit(self, group: Group, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if generation_id < 0 and group.is_(EMPTY):
            return None   # admin client or a consumer in assign mode
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = self._validate_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = E.ILLEGAL_GENERATION
            return error
        return None if group.is_(EMPTY) else E.UNKNOWN_MEMBER_ID

    def _store_offset(self, group: Group, commit: OffsetCommit, now_ms: int) -> ErrorCode:
        metadata = commit.metadata or ""
        if len(metadata) > self.config.offset_metadata_max_bytes:
            return E.OFFSET_METADATA_TOO_LARGE
        epoch = -1 if commit.leader_epoch is None else commit.leader_epoch
        entry = OffsetEntry(commit.offset, epoch, metadata, now_ms)
        group.offsets[(commit.topic, commit.partition)] = entry
        self._out.records.append(Record(group.group_id, offset_key(group.group_id, commit.topic, commit.partition),
                                        encode_offset_value(OffsetValue(entry.offset, entry.leader_epoch,
                                                                        entry.metadata, now_ms))))
        return E.NONE

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> list[tuple[str, int, int, int, str, ErrorCode]]:
        """OffsetFetch rows (topic, partition, offset, leader_epoch, metadata, error).

        ``partitions=None`` lists every committed offset (sorted); an unknown one is offset -1,
        leader epoch -1, metadata "" and NONE, as Kafka answers.
        """
        group = self._groups.get(group_id) if group_id is not None else None
        offsets = group.offsets if group is not None else {}
        wanted = sorted(offsets) if partitions is None else [(t, p) for t, p in partitions]
        rows = []
        for topic, partition in wanted:
            entry = offsets.get((topic, partition))
            if entry is None:
                rows.append((topic, partition, -1, -1, "", E.NONE))
            else:
                rows.append((topic, partition, entry.offset, entry.leader_epoch, entry.metadata, E.NONE))
        return rows

    @staticmethod
    def partition_for(group_id: str, num_partitions: int) -> int:
        return partition_for(group_id, num_partitions)


class _JoinRequest:
    __slots__ = ("ticket", "member_id", "group_instance_id", "protocol_type", "protocols", "session_timeout_ms",
                 "rebalance_timeout_ms", "client_id", "client_host", "api_version")

    def __init__(self, ticket, member_id, group_instance_id, protocol_type, protocols, session_timeout_ms,
                 rebalance_timeout_ms, client_id, client_host, api_version):
        self.ticket = ticket
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.client_host = client_host
        self.api_version = api_version
