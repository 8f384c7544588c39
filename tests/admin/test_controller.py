"""The controller's decisions on plain views: elections, ISR shrink, controlled shutdown,
preferred leaders, imbalance, and Kafka's replica assignment."""
from __future__ import annotations

import collections
import random

import pytest

from kwire.admin.controller import (VALID_PREVIOUS, ClusterView, Controller, IllegalStateTransition,
                                    PartitionPhase, PartitionState, StateWrite, apply_writes,
                                    assign_replicas, phase_of)
from kwire.codecs.errors import ErrorCode, KafkaApiError

EPOCH = 5


def view(brokers, replicas=(1, 2, 3), state=None, *, shutting_down=(), topic="t"):
    """One partition t-0 with ``replicas``; ``state`` as (leader, leader_epoch, isr)."""
    states = {}
    if state is not None:
        leader, leader_epoch, isr = state
        states[(topic, 0)] = PartitionState(leader, leader_epoch, tuple(isr), 1, version=3)
    return ClusterView(brokers={b: None for b in brokers}, assignments={topic: {0: tuple(replicas)}},
                       states=states, shutting_down=set(shutting_down))


def only(writes) -> StateWrite:
    assert len(writes) == 1, writes
    return writes[0]


def leader_isr(write: StateWrite):
    return write.state.leader, write.state.leader_epoch, write.state.isr


# -- the transition table --------------------------------------------------------------------------
def test_transition_table_is_kafkas():
    P = PartitionPhase
    assert VALID_PREVIOUS[P.NEW] == {P.NON_EXISTENT}
    assert VALID_PREVIOUS[P.ONLINE] == {P.NEW, P.ONLINE, P.OFFLINE}
    assert VALID_PREVIOUS[P.OFFLINE] == {P.NEW, P.ONLINE, P.OFFLINE}
    assert VALID_PREVIOUS[P.NON_EXISTENT] == {P.OFFLINE}


def test_phase_of():
    assert phase_of(view({1}), ("t", 0)) is PartitionPhase.NEW
    assert phase_of(view({1}), ("u", 0)) is PartitionPhase.NON_EXISTENT
    assert phase_of(view({1}, state=(1, 0, [1])), ("t", 0)) is PartitionPhase.ONLINE
    assert phase_of(view({2}, state=(1, 0, [1])), ("t", 0)) is PartitionPhase.OFFLINE


def test_a_write_for_a_partition_that_does_not_exist_is_refused():
    with pytest.raises(IllegalStateTransition):
        Controller(EPOCH)._write(view({1}), ("gone", 0), 1, [1])


# -- new partitions --------------------------------------------------------------------------------
def test_new_partition_gets_first_live_replica_and_live_isr():
    w = only(Controller(EPOCH).on_topics_changed(view({2, 3}, replicas=(1, 2, 3))))
    assert (w.topic, w.partition, w.expected_version) == ("t", 0, -1)
    assert w.state == PartitionState(2, 0, (2, 3), EPOCH, 0)


def test_new_partition_without_live_replica_waits_for_a_broker():
    c = Controller(EPOCH)
    v = view({4}, replicas=(1, 2))
    assert c.on_topics_changed(v) == [] and c.on_brokers_changed(v) == []
    v.brokers[2] = None
    assert leader_isr(only(c.on_brokers_changed(v))) == (2, 0, (2,))


def test_initialised_partitions_are_not_written_twice():
    c = Controller(EPOCH)
    v = view({1, 2, 3})
    after = apply_writes(v, c.on_topics_changed(v))
    assert c.on_topics_changed(after) == [] and c.on_brokers_changed(after) == []


# -- failover --------------------------------------------------------------------------------------
def test_failover_elects_first_isr_member_in_assignment_order_and_bumps_epoch():
    v = view({1, 3}, replicas=(2, 3, 1), state=(2, 4, [1, 2, 3]))
    w = only(Controller(EPOCH).on_brokers_changed(v))
    assert leader_isr(w) == (3, 5, (1, 3))
    assert w.expected_version == 3 and w.state.controller_epoch == EPOCH


def test_failover_skips_live_replicas_outside_the_isr():
    v = view({1, 2, 3}.difference({1}), replicas=(1, 2, 3), state=(1, 0, [1, 3]))
    assert leader_isr(only(Controller(EPOCH).on_brokers_changed(v))) == (3, 1, (3,))


def test_dead_follower_leaves_the_isr_with_an_epoch_bump():
    v = view({1, 2}, state=(1, 0, [1, 2, 3]))
    assert leader_isr(only(Controller(EPOCH).on_brokers_changed(v))) == (1, 1, (1, 2))


def test_no_change_no_write():
    assert Controller(EPOCH).on_brokers_changed(view({1, 2, 3}, state=(1, 0, [1, 2, 3]))) == []


def test_no_live_isr_goes_offline_keeping_the_last_leader_and_comes_back_with_it():
    c = Controller(EPOCH)
    v = view({2, 3}, replicas=(1, 2, 3), state=(1, 6, [1]))
    w = only(c.on_brokers_changed(v))
    assert leader_isr(w) == (-1, 7, (1,))
    offline = apply_writes(v, [w])
    assert phase_of(offline, ("t", 0)) is PartitionPhase.OFFLINE
    assert c.on_brokers_changed(offline) == []                  # nothing new while 1 is away
    offline.brokers[1] = None
    back = only(c.on_brokers_changed(offline))
    assert leader_isr(back) == (1, 8, (1,))
    assert back.expected_version == 4


def test_all_isr_dead_at_once_keeps_the_old_leader_in_the_isr():
    v = view({3}, replicas=(1, 2, 3), state=(2, 0, [1, 2]))
    assert leader_isr(only(Controller(EPOCH).on_brokers_changed(v))) == (-1, 1, (2,))


def test_unclean_election_picks_first_live_replica_with_isr_of_one():
    v = view({2, 3}, replicas=(1, 3, 2), state=(1, 0, [1]))
    assert leader_isr(only(Controller(EPOCH, unclean_leader_election=True).on_brokers_changed(v))) == (3, 1, (3,))
    assert leader_isr(only(Controller(EPOCH).on_brokers_changed(v))) == (-1, 1, (1,))


def test_election_avoids_brokers_in_controlled_shutdown():
    v = view({2, 3}, replicas=(1, 2, 3), state=(1, 0, [1, 2, 3]), shutting_down={2})
    assert leader_isr(only(Controller(EPOCH).on_brokers_changed(v))) == (3, 1, (3,))


def test_methods_do_not_mutate_the_view():
    v = view({2, 3}, state=(1, 0, [1, 2, 3]))
    before = (dict(v.brokers), dict(v.states), set(v.shutting_down))
    c = Controller(EPOCH)
    c.on_brokers_changed(v), c.controlled_shutdown(v, 2), c.elect_preferred(v, None)
    assert (dict(v.brokers), dict(v.states), set(v.shutting_down)) == before


# -- controlled shutdown ---------------------------------------------------------------------------
def shutdown_view():
    v = ClusterView(brokers={1: None, 2: None, 3: None}, assignments={"t": {
        0: (1, 2, 3),     # led by 1
        1: (2, 1, 3),     # 1 follows
        2: (1, 2),        # led by 1, only ISR member
        3: (1,),          # single replica: cannot move
    }}, states={}, shutting_down={1})
    v.states = {("t", 0): PartitionState(1, 0, (1, 2, 3), 1, 0), ("t", 1): PartitionState(2, 0, (2, 1, 3), 1, 0),
                ("t", 2): PartitionState(1, 0, (1,), 1, 0), ("t", 3): PartitionState(1, 0, (1,), 1, 0)}
    return v


def test_controlled_shutdown_moves_leaders_and_leaves_isrs():
    c, v = Controller(EPOCH), shutdown_view()
    assert c.leaderships(v, 1) == 2
    writes = {w.partition: leader_isr(w) for w in c.controlled_shutdown(v, 1)}
    assert writes == {0: (2, 1, (2, 3)), 1: (2, 1, (2, 3))}
    after = apply_writes(v, c.controlled_shutdown(v, 1))
    assert c.leaderships(after, 1) == 1                    # t-2: no other ISR member yet
    assert c.controlled_shutdown(after, 1) == []
    assert all(1 not in s.isr for tp, s in after.states.items() if tp[1] in (0, 1))


def test_controlled_shutdown_finishes_once_the_follower_catches_up():
    c, v = Controller(EPOCH), shutdown_view()
    after = apply_writes(v, c.controlled_shutdown(v, 1))
    after.states[("t", 2)] = PartitionState(1, 0, (1, 2), 1, 1)     # the leader added 2 to the ISR
    assert leader_isr(only(c.controlled_shutdown(after, 1))) == (2, 1, (2,))
    assert c.leaderships(apply_writes(after, c.controlled_shutdown(after, 1)), 1) == 0


def test_controlled_shutdown_of_unknown_broker_is_a_no_op():
    assert Controller(EPOCH).controlled_shutdown(shutdown_view(), 9) == []


# -- preferred election ----------------------------------------------------------------------------
def test_elect_preferred_results_per_partition():
    v = ClusterView(brokers={1: None, 2: None, 3: None}, assignments={"t": {
        0: (1, 2, 3), 1: (1, 2, 3), 2: (3, 1, 2), 3: (2, 3, 1), 4: (1, 2)}}, states={
        ("t", 0): PartitionState(2, 3, (1, 2, 3), 1, 5),     # preferred 1 live, in ISR -> elect
        ("t", 1): PartitionState(1, 0, (1, 2, 3), 1, 0),     # already preferred
        ("t", 2): PartitionState(1, 0, (1, 2), 1, 0),        # preferred 3 not in ISR
        ("t", 3): PartitionState(3, 0, (2, 3), 1, 0)},       # preferred 2 shutting down
        shutting_down={2})
    writes, results = Controller(EPOCH).elect_preferred(v, [("t", 0), ("t", 1), ("t", 2), ("t", 3),
                                                            ("t", 4), ("t", 9), ("nope", 0)])
    assert results == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                       ("t", 2): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                       ("t", 3): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                       ("t", 4): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,      # no state yet
                       ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    w = only(writes)
    assert (w.partition, w.expected_version) == (0, 5)
    assert leader_isr(w) == (1, 4, (1, 2, 3))


def test_elect_preferred_none_means_every_partition():
    v = view({1, 2, 3}, state=(2, 0, [1, 2, 3]))
    writes, results = Controller(EPOCH).elect_preferred(v, None)
    assert results == {("t", 0): ErrorCode.NONE} and leader_isr(only(writes)) == (1, 1, (1, 2, 3))


def test_elect_unclean():
    c = Controller(EPOCH)
    v = view({2, 3}, replicas=(1, 2, 3), state=(-1, 2, [1]))
    writes, results = c.elect_unclean(v, [("t", 0)])
    assert results == {("t", 0): ErrorCode.NONE} and leader_isr(only(writes)) == (2, 3, (2,))
    assert c.elect_unclean(view({1, 2}, state=(1, 0, [1])), None)[1] == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert c.elect_unclean(view({9}, state=(1, 0, [1])), None)[1] == \
        {("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


# -- imbalance -------------------------------------------------------------------------------------
def imbalance_view(leaders):
    """10 partitions preferred by broker 1 (replicas 1,2), led by ``leaders[p]``."""
    assignments = {"t": {p: (1, 2) for p in range(10)}}
    states = {("t", p): PartitionState(leaders[p], 1, (1, 2), 1, 1) for p in range(10)}
    return ClusterView({1: None, 2: None}, assignments, states)


def test_imbalance_above_threshold_elects_back():
    v = imbalance_view([2, 2] + [1] * 8)             # 20 % not led by the preferred broker
    assert Controller.imbalanced_partitions(v, 10) == [("t", 0), ("t", 1)]
    assert Controller.imbalanced_partitions(v, 20) == []      # Kafka's test is strictly greater


def test_imbalance_skips_partitions_the_preferred_broker_cannot_lead():
    v = imbalance_view([2, 2, 2] + [1] * 7)
    v.states[("t", 0)] = PartitionState(2, 1, (2,), 1, 1)
    assert Controller.imbalanced_partitions(v, 10) == [("t", 1), ("t", 2)]
    v.shutting_down = {1}
    assert Controller.imbalanced_partitions(v, 10) == []


def test_balanced_cluster_has_no_imbalance():
    assignment = assign_replicas({1: None, 2: None, 3: None}, 6, 3, start_index=0)
    states = {("t", p): PartitionState(r[0], 0, r, 1, 0) for p, r in assignment.items()}
    v = ClusterView({1: None, 2: None, 3: None}, {"t": assignment}, states)
    assert Controller.imbalanced_partitions(v) == []


# -- replica assignment (Kafka's AdminUtils) --------------------------------------------------------
def test_assignment_matches_kafkas_rack_unaware_example():
    got = assign_replicas({b: None for b in range(5)}, 10, 3, start_index=0)
    assert got == {0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
                   5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}


def test_assignment_matches_kafkas_rack_aware_example():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas(racks, 7, 3, start_index=0) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


@pytest.mark.parametrize("seed", range(5))
def test_every_partition_has_distinct_replicas_and_leaders_spread_evenly(seed):
    got = assign_replicas({1: None, 2: None, 3: None}, 6, 3, rng=random.Random(seed))
    assert sorted(got) == list(range(6))
    assert all(len(set(r)) == 3 for r in got.values())
    assert collections.Counter(r[0] for r in got.values()) == {1: 2, 2: 2, 3: 2}


@pytest.mark.parametrize("seed", range(5))
def test_rack_aware_puts_replicas_on_distinct_racks(seed):
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    got = assign_replicas(racks, 12, 3, rng=random.Random(seed))
    assert all(len({racks[b] for b in r}) == 3 for r in got.values())
    assert collections.Counter(r[0] for r in got.values()) == {b: 2 for b in racks}


def test_random_start_without_rng_still_valid():
    got = assign_replicas({1: None, 2: None}, 4, 2)
    assert all(sorted(r) == [1, 2] for r in got.values())


def test_create_partitions_appends_after_existing_starting_at_partition_0_leader():
    existing = assign_replicas({1: None, 2: None, 3: None}, 3, 2, start_index=1)
    assert existing[0][0] == 2
    got = assign_replicas({1: None, 2: None, 3: None}, 3, 2, existing=existing)
    assert sorted(got) == [3, 4, 5]
    assert got == assign_replicas({1: None, 2: None, 3: None}, 3, 2, start_index=1, start_partition=3)
    assert sorted(assign_replicas({1: None, 2: None}, 2, 1, start_partition=4, start_index=0)) == [4, 5]


@pytest.mark.parametrize("brokers, n, rf, code, message", [
    ({1: None, 2: None}, 3, 3, ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor: 3 larger than available brokers: 2."),
    ({1: None}, 3, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
    ({1: None}, 0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
    ({1: "a", 2: None}, 1, 1, ErrorCode.UNKNOWN_SERVER_ERROR,
     "Not all brokers have rack information for replica rack aware assignment."),
])
def test_assignment_errors(brokers, n, rf, code, message):
    with pytest.raises(KafkaApiError) as info:
        assign_replicas(brokers, n, rf, start_index=0)
    assert (info.value.code, info.value.message) == (code, message)
