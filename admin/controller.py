"""The cluster controller's decisions, sans-I/O: Kafka's ZooKeeper-era KafkaController.

The driver (``kwire.cluster.node``) reads ZooKeeper into a ``ClusterView``, calls
one method here and writes the returned ``StateWrite``s to the partition state
znodes, each conditional on the znode version it read (and on
``/controller_epoch``, so a deposed controller cannot write).  Nothing here
mutates the view; calling a method again on an unchanged view returns nothing
new, so the driver can reconcile level-triggered.

Kafka's rules (``kafka.controller``), followed here.  A replica is *eligible*
when its broker is live and not in controlled shutdown (Kafka's
``isReplicaOnline``):

* Partition lifecycle (``PartitionPhase``, transitions in ``VALID_PREVIOUS``):
  NonExistent -> New (assigned, no state znode) -> Online (a live leader) or
  Offline (none).  New -> Online needs an eligible replica: leader = the first
  in assignment order, ISR = all eligible replicas; otherwise the partition
  stays New (no znode) until a broker change brings one.
* Offline election: the first replica in assignment order that is eligible
  and in the ISR; ISR = the old ISR's eligible members.  Failing that, with
  unclean.leader.election.enable the first eligible replica with ISR = [it];
  otherwise the partition goes offline (leader -1).
* A dead broker leaves every ISR, except where it is the last member: Kafka
  keeps the last ISR member (here the old leader, whose log is the longest)
  so the partition comes back without data loss when that broker returns.
* Every controller change of leader or ISR bumps leader_epoch
  (``LeaderAndIsr.newLeaderAndIsr``).  ISR changes made by leaders are not the
  controller's business (they write the znode themselves, conditionally).
* Controlled shutdown acts on partitions with more than one replica: a
  partition it leads moves to the first eligible ISR member (ISR minus the
  shutting-down brokers); where it follows, it leaves the ISR unless it is the
  last member.
* Preferred election elects the first assigned replica when it is eligible and
  in the ISR, ISR unchanged.  Auto rebalance (leader.imbalance.per.broker.
  percentage) elects, for each broker whose share of preferred partitions led
  by someone else exceeds the threshold, those it can take back.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from kwire.codecs.errors import ErrorCode

from .assignment import assign_replicas  # noqa: F401  (part of the controller's API)
from .reassignment import ReplicaAssignment, completion, misplaced
from .zk_layout import NEW_ZNODE, NO_LEADER, PartitionState

TopicPartition = tuple[str, int]


class PartitionPhase(enum.Enum):
    """Kafka's controller-side partition states."""
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


# target phase -> the phases a partition may move from (Kafka's validPreviousStates).
# Online -> Online is a leader change (preferred election, controlled shutdown) or an ISR change.
VALID_PREVIOUS: dict[PartitionPhase, frozenset[PartitionPhase]] = {
    PartitionPhase.NEW: frozenset({PartitionPhase.NON_EXISTENT}),
    PartitionPhase.ONLINE: frozenset({PartitionPhase.NEW, PartitionPhase.ONLINE, PartitionPhase.OFFLINE}),
    PartitionPhase.OFFLINE: frozenset({PartitionPhase.NEW, PartitionPhase.ONLINE, PartitionPhase.OFFLINE}),
    PartitionPhase.NON_EXISTENT: frozenset({PartitionPhase.OFFLINE}),
}


class IllegalStateTransition(RuntimeError):
    """A decision would move a partition along a transition Kafka does not allow (a bug)."""


@dataclass
class ClusterView:
    """What the driver read from ZooKeeper."""
    brokers: dict[int, str | None]                       # live broker id -> rack
    assignments: dict[str, dict[int, tuple[int, ...]]]   # topic -> partition -> replicas (first = preferred)
    states: dict[TopicPartition, PartitionState]
    shutting_down: set[int] = field(default_factory=set)
    # partitions with a reassignment in progress (KIP-455); ``assignments`` holds their full RS
    reassigning: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)

    def eligible(self) -> set[int]:
        """Brokers that may become leader or join an ISR by election: live, not shutting down."""
        return set(self.brokers) - self.shutting_down

    def partitions(self) -> Iterator[tuple[TopicPartition, tuple[int, ...]]]:
        """Every assigned partition with its replicas, in topic and partition order."""
        for topic in sorted(self.assignments):
            for partition, replicas in sorted(self.assignments[topic].items()):
                yield (topic, partition), tuple(replicas)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...] | None:
        found = self.assignments.get(tp[0], {}).get(tp[1])
        return tuple(found) if found is not None else None


@dataclass(frozen=True)
class StateWrite:
    """Create (expected_version == -1) or conditionally update a partition state znode.
    ``state.version`` is the znode version the write will produce."""
    topic: str
    partition: int
    state: PartitionState
    expected_version: int


def phase_of(view: ClusterView, tp: TopicPartition) -> PartitionPhase:
    """The partition's phase as the view shows it."""
    if view.replicas(tp) is None:
        return PartitionPhase.NON_EXISTENT
    state = view.states.get(tp)
    if state is None:
        return PartitionPhase.NEW
    return PartitionPhase.ONLINE if state.leader in view.brokers else PartitionPhase.OFFLINE


def apply_writes(view: ClusterView, writes: Iterable[StateWrite]) -> ClusterView:
    """The view after ``writes`` succeed, each state at the znode version its write
    produces: what the next read of ZooKeeper shows.  The driver reads ZooKeeper again
    instead (``kwire.cluster.node``); tests use this to follow decisions step by step."""
    states = dict(view.states)
    for w in writes:
        states[(w.topic, w.partition)] = dataclasses.replace(w.state, version=w.expected_version + 1)
    return dataclasses.replace(view, states=states, shutting_down=set(view.shutting_down))


def _first(replicas: Iterable[int], accept: Callable[[int], bool]) -> int | None:
    return next((r for r in replicas if accept(r)), None)


def _survivors(state: PartitionState, live: set[int] | dict) -> tuple[int, ...]:
    """The ISR without dead brokers; never empty while the old ISR was not."""
    isr = tuple(r for r in state.isr if r in live)
    if isr or not state.isr:
        return isr
    return (state.leader,) if state.leader in state.isr else state.isr[:1]


class Controller:
    """Decisions of the controller elected with ``controller_epoch``; every method is pure."""

    def __init__(self, controller_epoch: int, *, unclean_leader_election: bool = False):
        self.controller_epoch = controller_epoch
        self.unclean_leader_election = unclean_leader_election

    # -- writes ---------------------------------------------------------------------------
    def _write(self, view: ClusterView, tp: TopicPartition, leader: int, isr: Iterable[int]) -> StateWrite:
        """The one place a decision becomes a write, checked against the transition table."""
        current = phase_of(view, tp)
        target = PartitionPhase.ONLINE if leader != NO_LEADER else PartitionPhase.OFFLINE
        if current not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"{tp[0]}-{tp[1]}: {current.value} -> {target.value}")
        old = view.states.get(tp)
        leader_epoch = old.leader_epoch + 1 if old is not None else 0
        expected = old.version if old is not None else NEW_ZNODE
        state = PartitionState(leader, leader_epoch, tuple(isr), self.controller_epoch, expected + 1)
        return StateWrite(tp[0], tp[1], state, expected)

    def _initialise(self, view: ClusterView, tp: TopicPartition, replicas: tuple[int, ...]) -> StateWrite | None:
        """New -> Online, or nothing while no replica is eligible (the partition stays New)."""
        eligible = view.eligible()
        isr = [r for r in replicas if r in eligible]
        return self._write(view, tp, isr[0], isr) if isr else None

    def _elect_offline(self, view: ClusterView, tp: TopicPartition, replicas: tuple[int, ...],
                       state: PartitionState, unclean: bool) -> StateWrite | None:
        eligible = view.eligible()
        leader = _first(replicas, lambda r: r in eligible and r in state.isr)
        if leader is not None:
            return self._write(view, tp, leader, [r for r in state.isr if r in eligible])
        if unclean:
            leader = _first(replicas, eligible.__contains__)
            if leader is not None:
                return self._write(view, tp, leader, [leader])
        isr = _survivors(state, view.brokers)
        if state.leader == NO_LEADER and isr == state.isr:
            return None                       # already offline, nothing new
        return self._write(view, tp, NO_LEADER, isr)

    # -- broker and topic changes ---------------------------------------------------------
    def on_brokers_changed(self, view: ClusterView) -> list[StateWrite]:
        """Brokers came or went: elect leaders for partitions whose leader is not live (or
        take them offline), drop dead brokers from the ISRs of live leaders, bring offline
        partitions back when an ISR member returns, and initialise New partitions."""
        writes = []
        for tp, replicas in view.partitions():
            state = view.states.get(tp)
            if state is None:
                w = self._initialise(view, tp, replicas)
            elif state.leader in view.brokers:
                isr = _survivors(state, view.brokers)
                w = self._write(view, tp, state.leader, isr) if isr != state.isr else None
            else:
                w = self._elect_offline(view, tp, replicas, state, self.unclean_leader_election)
            if w is not None:
                writes.append(w)
        return writes

    def on_topics_changed(self, view: ClusterView) -> list[StateWrite]:
        """Topics or partitions were added: create the state of every New partition that has
        an eligible replica (the others wait for on_brokers_changed)."""
        writes = []
        for tp, replicas in view.partitions():
            if tp not in view.states and (w := self._initialise(view, tp, replicas)) is not None:
                writes.append(w)
        return writes

    # -- partition reassignment (kwire.admin.reassignment) ---------------------------------
    def on_reassignments(self, view: ClusterView, skip: set[TopicPartition] = frozenset()
                         ) -> tuple[list[StateWrite], dict[str, tuple[dict[int, ReplicaAssignment], list[StateWrite]]]]:
        """Reassignments whose target replicas are all in the ISR complete: per topic, the
        partitions' new assignments (RS = TRS) with the state writes that go in the same
        transaction (a target replica leads, the ISR loses the removed ones).  Separately, the
        states whose leader or ISR is outside the replica set (a cancelled reassignment dropped
        a replica being added) are set right.  Partitions in ``skip`` (written by another
        decision in this round) wait for the next."""
        eligible = view.eligible()
        fixes: list[StateWrite] = []
        completed: dict[str, tuple[dict[int, ReplicaAssignment], list[StateWrite]]] = {}
        for tp, replicas in view.partitions():
            if tp in skip:
                continue
            state = view.states.get(tp)
            moving = view.reassigning.get(tp)
            if moving is not None:
                done = completion(moving, state, eligible)
                if done is not None:
                    changes, writes = completed.setdefault(tp[0], ({}, []))
                    changes[tp[1]] = ReplicaAssignment(moving.target)
                    writes.append(self._write(view, tp, *done))
                continue
            fix = misplaced(replicas, state, eligible)
            if fix is not None:
                fixes.append(self._write(view, tp, *fix))
        return fixes, completed

    # -- controlled shutdown --------------------------------------------------------------
    def controlled_shutdown(self, view: ClusterView, broker_id: int) -> list[StateWrite]:
        """Move leadership off ``broker_id`` and take it out of ISRs where another member
        remains.  A broker that is not live has nothing to hand over (on_brokers_changed
        handled its partitions), so the result is empty rather than an error."""
        if broker_id not in view.brokers:
            return []
        shutting = view.shutting_down | {broker_id}
        writes = []
        for tp, replicas in view.partitions():
            state = view.states.get(tp)
            if state is None or broker_id not in replicas or len(replicas) < 2:
                continue
            if state.leader == broker_id:
                leader = _first(replicas, lambda r: r in view.brokers and r in state.isr and r not in shutting)
                if leader is not None:
                    writes.append(self._write(view, tp, leader, [r for r in state.isr if r not in shutting]))
            elif broker_id in state.isr and len(state.isr) > 1:
                writes.append(self._write(view, tp, state.leader, [r for r in state.isr if r != broker_id]))
        return writes

    @staticmethod
    def leaderships(view: ClusterView, broker_id: int) -> int:
        """Partitions ``broker_id`` still leads that have another replica (Kafka's "remaining
        partitions" of a controlled shutdown; a single-replica partition cannot move)."""
        return sum(1 for tp, replicas in view.partitions()
                   if len(replicas) > 1 and (s := view.states.get(tp)) is not None and s.leader == broker_id)

    # -- elections requested by admins ----------------------------------------------------
    def _targets(self, view: ClusterView, partitions: Iterable[TopicPartition] | None) -> list[TopicPartition]:
        if partitions is None:
            return [tp for tp, _ in view.partitions()]
        return list(dict.fromkeys((t, int(p)) for t, p in partitions))

    def elect_preferred(self, view: ClusterView, partitions: Iterable[TopicPartition] | None = None
                        ) -> tuple[list[StateWrite], dict[TopicPartition, ErrorCode]]:
        """ElectLeaders(PREFERRED): per partition NONE (a write), ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION.  None = every partition."""
        eligible = view.eligible()
        writes, results = [], {}
        for tp in self._targets(view, partitions):
            replicas, state = view.replicas(tp), view.states.get(tp)
            if not replicas:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state is not None and state.leader == replicas[0]:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
            elif state is None or replicas[0] not in eligible or replicas[0] not in state.isr:
                results[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                writes.append(self._write(view, tp, replicas[0], state.isr))
                results[tp] = ErrorCode.NONE
        return writes, results

    def elect_unclean(self, view: ClusterView, partitions: Iterable[TopicPartition] | None = None
                      ) -> tuple[list[StateWrite], dict[TopicPartition, ErrorCode]]:
        """ElectLeaders(UNCLEAN): for partitions without an eligible leader, the offline
        election with unclean election allowed.  Per partition NONE, ELECTION_NOT_NEEDED,
        ELIGIBLE_LEADERS_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PARTITION."""
        eligible = view.eligible()
        writes, results = [], {}
        for tp in self._targets(view, partitions):
            replicas, state = view.replicas(tp), view.states.get(tp)
            if not replicas:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state is not None and state.leader in eligible:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
            elif state is None or (w := self._elect_offline(view, tp, replicas, state, True)) is None \
                    or w.state.leader == NO_LEADER:
                results[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            else:
                writes.append(w)
                results[tp] = ErrorCode.NONE
        return writes, results

    @staticmethod
    def imbalanced_partitions(view: ClusterView, threshold_percent: float = 10) -> list[TopicPartition]:
        """Kafka's auto leader rebalance check: for each broker, the share of the partitions it
        is preferred for but does not lead; above ``threshold_percent``
        (leader.imbalance.per.broker.percentage) its partitions it can lead again (eligible,
        in the ISR) are returned, for elect_preferred."""
        eligible = view.eligible()
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, replicas in view.partitions():
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        out = []
        for broker, tps in sorted(by_preferred.items()):
            not_led = [tp for tp in tps if tp in view.states and view.states[tp].leader != broker]
            if len(not_led) / len(tps) > threshold_percent / 100:
                out += [tp for tp in not_led if broker in eligible and broker in view.states[tp].isr]
        return sorted(out)
