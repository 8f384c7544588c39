"""The state of one KIP-848 consumer group and the reconciliation of a member.

Three epochs, as Kafka: the *group epoch* goes up when a subscription or the
subscribed topics' metadata changes; the *assignment epoch* is the group epoch
the target assignment was computed for; a member's *member epoch* reaches the
assignment epoch once the member owns exactly its target partitions, through
``reconcile`` (Kafka's CurrentAssignmentBuilder): partitions to revoke first (the
member stays at its epoch, UNREVOKED_PARTITIONS, until a heartbeat no longer lists
them), partitions another member still holds last (UNRELEASED_PARTITIONS).

The group state is derived from the epochs, as in Kafka; ``ConsumerGroup.update_state``
checks each change against ``VALID_PREVIOUS_STATES``.
"""
from __future__ import annotations

import enum
import re
import uuid
from dataclasses import dataclass, field

from .consumer_records import ClassicMetadata

Assignment = dict  # topic_id (uuid.UUID) -> frozenset of partitions
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class ConsumerGroupState(enum.Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState, valued as Kafka prints them."""
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


_S = ConsumerGroupState
VALID_PREVIOUS_STATES: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.STABLE}),
    _S.ASSIGNING: frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.STABLE}),
    _S.RECONCILING: frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.STABLE}),
    _S.STABLE: frozenset({_S.EMPTY, _S.ASSIGNING, _S.RECONCILING, _S.STABLE}),
    _S.DEAD: frozenset(_S),
}


class MemberState(enum.IntEnum):
    """Kafka's MemberState (the int8 of the CurrentMemberAssignment record)."""
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class InvalidTransition(RuntimeError):
    """A coordinator bug: a state change the table does not allow."""


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    session_deadline_ms: int | None = None      # None until the first clock after a replay
    rebalance_deadline_ms: int | None = None    # set while partitions await revocation
    # A classic member (JoinGroup/SyncGroup/Heartbeat) of a mixed group: its session timeout and
    # JoinGroup protocols (Kafka's ClassicMemberMetadata); None for a consumer-protocol member.
    classic: ClassicMetadata | None = None
    # Kafka's timers of a classic member, not persisted: it must rejoin within its rebalance
    # timeout once told to, and sync within it after joining, or it is fenced.
    join_deadline_ms: int | None = None
    sync_deadline_ms: int | None = None

    def subscription_key(self) -> tuple:
        return (self.subscribed_topic_names, self.subscribed_topic_regex, self.server_assignor, self.rack_id,
                self.instance_id, self.client_id, self.client_host, self.rebalance_timeout_ms, self.classic)

    def matches(self, topic: str) -> bool:
        """Whether the member subscribes ``topic`` by name or regex (Python ``re`` full match;
        Kafka uses RE2/J, whose syntax is mostly but not wholly the same)."""
        if topic in self.subscribed_topic_names:
            return True
        regex = compiled(self.subscribed_topic_regex)
        return regex is not None and regex.fullmatch(topic) is not None


_REGEX_CACHE: dict[str, re.Pattern | None] = {}


def compiled(regex: str | None) -> re.Pattern | None:
    """The compiled pattern, None for no or an invalid pattern."""
    if regex is None:
        return None
    if regex not in _REGEX_CACHE:
        try:
            _REGEX_CACHE[regex] = re.compile(regex)
        except re.error:
            _REGEX_CACHE[regex] = None
    return _REGEX_CACHE[regex]


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)       # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)        # member id -> target assignment
    # name -> (topic id, partitions) of the topics the members subscribe (Kafka's subscription metadata)
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    # When the last member left (None: has members, or replayed before the first clock).
    empty_since_ms: int | None = None

    def update_state(self) -> ConsumerGroupState:
        """Derive the state from the epochs (Kafka's maybeUpdateGroupState), checked by the table."""
        if not self.members:
            new = _S.EMPTY
        elif self.group_epoch > self.assignment_epoch:
            new = _S.ASSIGNING
        elif any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
                 for m in self.members.values()):
            new = _S.RECONCILING
        else:
            new = _S.STABLE
        if self.state not in VALID_PREVIOUS_STATES[new]:
            raise InvalidTransition(f"group {self.group_id}: {self.state.value} -> {new.value}")
        self.state = new
        return new

    def owners(self) -> dict[tuple[uuid.UUID, int], str]:
        """Which member holds each partition (assigned or still to revoke)."""
        out = {}
        for m in self.members.values():
            for a in (m.assigned, m.pending_revocation):
                for tid, ps in a.items():
                    for p in ps:
                        out[(tid, p)] = m.member_id
        return out

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        if member is not None and member.instance_id is not None \
                and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member


def _owns_any(owned: list[tuple[uuid.UUID, list[int]]] | None, revoking: Assignment) -> bool:
    """Kafka's ownsRevokedPartitions: unknown ownership (None) counts as owning."""
    if owned is None:
        return True
    return any(p in revoking.get(tid, ()) for tid, ps in owned for p in ps)


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, owner_of,
              owned: list[tuple[uuid.UUID, list[int]]] | None) -> ConsumerMember:
    """Kafka's CurrentAssignmentBuilder.build: the member's next state, a new object when it changes.

    ``owner_of(tid, p)`` is the member id holding a partition (None when free); ``owned`` is
    what the heartbeat reports (None: not reported)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owner_of, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owner_of, owned)
    return _next(member, member.member_epoch, target_epoch, target, owner_of, owned)


def _next(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment, owner_of,
          owned) -> ConsumerMember:
    assigned: Assignment = {}
    revoking: Assignment = {}
    adding: Assignment = {}
    unreleased = False
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, frozenset())
        have = member.assigned.get(tid, frozenset())
        keep = have & want
        if keep:
            assigned[tid] = keep
        if have - keep:
            revoking[tid] = have - keep
        free = set()
        for p in want - keep:
            holder = owner_of(tid, p)
            if holder is None or holder == member.member_id:
                free.add(p)
            else:
                unreleased = True
        if free:
            adding[tid] = frozenset(free)
    new = ConsumerMember(**{**member.__dict__})
    new.pending_revocation = {}
    if revoking and _owns_any(owned, revoking):
        new.state = MemberState.UNREVOKED_PARTITIONS
        _set_epoch(new, epoch)
        new.assigned, new.pending_revocation = assigned, revoking
        return new
    for tid, ps in adding.items():
        assigned[tid] = assigned.get(tid, frozenset()) | ps
    new.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    _set_epoch(new, target_epoch)
    new.assigned = assigned
    return new


def _set_epoch(member: ConsumerMember, epoch: int) -> None:
    """Kafka's updateMemberEpoch: the previous epoch remembers the old one."""
    if epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = epoch
