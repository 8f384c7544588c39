"""Partition reassignment (KIP-455), sans-I/O: Kafka's ZooKeeper-era rules.

A partition's assignment is stored in its topic znode as three lists (Kafka's
``ReplicaAssignment``): the replica set RS, the replicas being added AR and the
replicas being removed RR.  A reassignment to a target TRS writes

    RS = (TRS + ORS) without duplicates, AR = RS - ORS, RR = RS - TRS

where ORS (the origin) is RS - AR of the assignment being replaced, so a
reassignment started on top of another keeps the original replicas as its
origin.  Every broker in RS replicates the partition: the adding replicas
fetch from the leader, catch up and join the ISR (the leader's ISR expansion).
Once every target replica is in the ISR the controller completes the move in
one ZooKeeper transaction:

* the partition state: the leader stays if it is in TRS and eligible, else the
  first eligible target replica in the ISR leads; ISR = ISR & TRS; a new
  leader epoch;
* the topic znode: RS = TRS, AR = RR = [].

A broker that is no longer in RS stops fetching and deletes its copy.  A
cancellation is a reassignment back to the origin: RS = ORS at once, and the
replicas that were being added are dropped (Kafka's ``reassignTo(origin)``).

``/admin/reassign_partitions`` (what ZooKeeper-era tools write) is honoured by
the controller: each entry starts a reassignment, and entries leave the znode as
their partitions complete; the znode goes once it is empty.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

from kwire.codecs.errors import ErrorCode

from .zk_layout import NO_LEADER, PartitionState


@dataclasses.dataclass(frozen=True)
class ReplicaAssignment:
    """RS, AR and RR of one partition (Kafka's ReplicaAssignment)."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS: the replicas before the reassignment in progress."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS: the replicas once the reassignment in progress completes."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Iterable[int]) -> ReplicaAssignment:
        target = tuple(target)
        origin = self.origin
        full = tuple(dict.fromkeys(target + origin))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))

    def cancelled(self) -> ReplicaAssignment:
        return self.reassign_to(self.origin)


class ReassignmentError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def validate_target(target: list[int] | None, current: ReplicaAssignment, live: Iterable[int], *,
                    allow_replication_factor_change: bool = True) -> None:
    """Kafka's checks of an AlterPartitionReassignments entry (None = cancel).  Raises
    ReassignmentError(INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
    INVALID_REPLICATION_FACTOR)."""
    if target is None:
        if not current.in_progress:
            raise ReassignmentError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                    "No reassignment is in progress for this partition.")
        return
    if not target:
        raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Duplicate replica ids in partition reassignment replica list: {target}")
    if any(r < 0 for r in target):
        raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Invalid broker id in replica list: {target}")
    live = set(live)
    if not set(target) <= live:
        raise ReassignmentError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"Replica assignment has brokers that are not alive. Replica list: {target}, "
                                f"live broker list: {sorted(live)}")
    if not allow_replication_factor_change and len(target) != len(current.origin):
        raise ReassignmentError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                f"The replication factor is changed from {len(current.origin)} to {len(target)}, "
                                f"which the request does not allow.")


def leader_among(candidates: Iterable[int], state: PartitionState, eligible: set[int]) -> int | None:
    """The current leader when it is a candidate and eligible, else the first eligible
    candidate in the ISR; None if there is none."""
    candidates = tuple(candidates)
    if state.leader in candidates and state.leader in eligible:
        return state.leader
    return next((r for r in candidates if r in eligible and r in state.isr), None)


def completion(assignment: ReplicaAssignment, state: PartitionState | None,
               eligible: set[int]) -> tuple[int, tuple[int, ...]] | None:
    """(leader, ISR) the partition gets when its reassignment completes now: every target
    replica in the ISR and one of them able to lead; None while it cannot complete."""
    if state is None or state.leader == NO_LEADER or not assignment.in_progress:
        return None
    target = assignment.target
    if not set(target) <= set(state.isr):
        return None
    leader = leader_among(target, state, eligible)
    if leader is None:
        return None
    isr = tuple(r for r in state.isr if r in target)
    return leader, isr


def misplaced(replicas: tuple[int, ...], state: PartitionState | None,
              eligible: set[int]) -> tuple[int, tuple[int, ...]] | None:
    """A state whose leader or ISR names brokers outside the replica set (after a
    cancellation dropped the replicas being added): the (leader, ISR) it should have, or
    None when it is consistent or no replica can lead yet."""
    if state is None or state.leader == NO_LEADER:
        return None
    if state.leader in replicas and set(state.isr) <= set(replicas):
        return None
    leader = leader_among(replicas, state, eligible)
    if leader is None:
        return None
    isr = tuple(r for r in state.isr if r in replicas)
    if leader not in isr:
        isr = (leader,) + isr
    return leader, isr


def bytes_to_copy(leader_size: int, replica_sizes: dict[int, int], adding: Iterable[int]) -> int:
    """What the adding replicas still miss, from DescribeLogDirs sizes: the leader's size
    minus each adding replica's, summed (never negative)."""
    return sum(max(0, leader_size - replica_sizes.get(r, 0)) for r in adding)


def legacy_steps(entries: dict[tuple[str, int], tuple[int, ...]],
                 current: dict[tuple[str, int], ReplicaAssignment], live: Iterable[int]
                 ) -> tuple[dict[tuple[str, int], ReplicaAssignment], dict[tuple[str, int], tuple[int, ...]]]:
    """The controller's handling of ``/admin/reassign_partitions``: (the reassignments to
    start, the entries that stay in the znode).  An entry stays until its partition has the
    target as its whole replica set; an unknown partition or an invalid target is dropped
    (Kafka logs it and removes it)."""
    starts, remaining = {}, {}
    for tp, target in entries.items():
        now = current.get(tp)
        if now is None:
            continue
        if now.target == tuple(target):
            if now.in_progress:
                remaining[tp] = tuple(target)
            continue
        try:
            validate_target(list(target), now, live)
        except ReassignmentError:
            continue
        starts[tp] = now.reassign_to(target)
        remaining[tp] = tuple(target)
    return starts, remaining

