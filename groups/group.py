"""The state of one classic group: members, generation, committed offsets.

Plain data plus the small rules that depend on nothing but the group
(protocol support, the protocol vote, subscribed topics, when the next timer
of the group is due).  Which state may follow which is the table ``VALID_PREVIOUS_STATES``; the
coordinator decides when to move.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from kwire.codecs.errors import ErrorCode

from .records import GroupRecordError, parse_subscription

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """The classic group states, valued as Kafka prints them."""
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
# Kafka's GroupState.validPreviousStates: a state may be entered only from these.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.STABLE, _S.COMPLETING_REBALANCE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(_S),
}


class InvalidTransition(RuntimeError):
    """A coordinator bug: a state change the table above does not allow."""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # Heartbeat expiry; None until the first clock reading after a replay.
    deadline_ms: int | None = None
    # A new member's JoinGroup is still parked; it expires by the new-member
    # join timeout instead of being exempt while awaiting the join.
    is_new: bool = False
    join_tickets: list[int] = field(default_factory=list)
    sync_tickets: list[int] = field(default_factory=list)

    @property
    def awaiting_join(self) -> bool:
        return bool(self.join_tickets)

    @property
    def awaiting_sync(self) -> bool:
        return bool(self.sync_tickets)

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def session_deadline(self) -> int | None:
        """When the member expires, or None while a parked request stands in for heartbeats."""
        if self.is_new or not (self.awaiting_join or self.awaiting_sync):
            return self.deadline_ms
        return None


@dataclass
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1   # only from v1 records written by old brokers


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)   # group_instance_id -> member_id
    pending_members: dict[str, int] = field(default_factory=dict)  # member_id -> expiry (MEMBER_ID_REQUIRED)
    pending_sync: set[str] = field(default_factory=set)
    sync_deadline_ms: int | None = None
    join_deadline_ms: int | None = None
    # InitialDelayedJoin: the join phase of an Empty group is delayed and
    # extended by the initial delay while new members keep arriving.
    initial_delay_remaining_ms: int | None = None
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    # Offsets committed inside open transactions (TxnOffsetCommit), by producer id: they
    # replace ``offsets`` when the transaction commits and vanish when it aborts.
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetEntry]] = field(default_factory=dict)
    # Replayed members get their session deadline on the first clock reading.
    unscheduled: bool = False

    # -- membership ---------------------------------------------------------
    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        """Move to ``state`` at ``now_ms``; raises InvalidTransition if the table forbids it."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise InvalidTransition(f"group {self.group_id!r}: {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id, keeping its place, assignment and leadership."""
        member = self.members[old_id]
        member.member_id = new_id
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def member_error(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's member check: an unknown member (or instance id) is UNKNOWN_MEMBER_ID, a static
        member speaking under another member id FENCED_INSTANCE_ID; None when it is known."""
        if group_instance_id is not None:
            current = self.static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------
    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        counts = self._protocol_counts()
        return any(counts[n] == len(self.members) for n in names)

    def _protocol_counts(self) -> Counter:
        counts: Counter = Counter()
        for m in self.members.values():
            counts.update(set(m.protocol_names()))
        return counts

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its first choice among the protocols all support.

        Ties go to the protocol the leader prefers (Kafka leaves them to hash order).
        """
        counts = self._protocol_counts()
        candidates = {n for n, c in counts.items() if c == len(self.members)}
        if not candidates:
            raise ValueError(f"no protocol common to all members of {self.group_id!r}")
        votes: Counter = Counter()
        for m in self.members.values():
            votes[next(n for n in m.protocol_names() if n in candidates)] += 1
        best = max(votes.values())
        tied = {n for n, v in votes.items() if v == best}
        leader = self.members.get(self.leader_id) if self.leader_id else None
        order = (leader.protocol_names() if leader else []) + sorted(tied)
        return next(n for n in order if n in tied)

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members consume, or None when unknown (not a consumer group, bad metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(parse_subscription(m.metadata(self.protocol_name)))
        except GroupRecordError:
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    # -- timers --------------------------------------------------------------
    def offset_expiries(self, retention_ms: int) -> list[tuple[tuple[str, int], int]]:
        """When each expirable offset expires under Kafka's KIP-211 rules.

        Empty group with a protocol type: retention counts from when it became
        Empty; simple group (no protocol type): from each commit; Stable consumer
        group: offsets of topics no member subscribes to, from each commit.  Other
        offsets are kept.  A v1 record's explicit expire timestamp wins.
        """
        if self.state is GroupState.EMPTY:
            from_state = self.protocol_type is not None and self.state_timestamp is not None
            kept: frozenset[str] = frozenset()
        elif (self.state is GroupState.STABLE and self.protocol_type == CONSUMER_PROTOCOL_TYPE
              and self.subscribed_topics is not None):
            from_state, kept = False, self.subscribed_topics
        else:
            return []
        out = []
        for tp, entry in self.offsets.items():
            if tp[0] in kept:
                continue
            if entry.expire_timestamp >= 0:
                at = entry.expire_timestamp
            else:
                at = (self.state_timestamp if from_state else entry.commit_timestamp) + retention_ms
            out.append((tp, at))
        return out
