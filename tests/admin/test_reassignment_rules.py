"""Kafka's reassignment rules (KIP-455) and the controller's completion, without ZooKeeper."""
from __future__ import annotations

import pytest

from kwire.admin.controller import ClusterView, Controller, apply_writes
from kwire.admin.reassignment import (ReassignmentError, ReplicaAssignment, completion, legacy_steps, misplaced,
                                      validate_target)
from kwire.admin.zk_layout import PartitionState
from kwire.cluster.throttles import LONG_MAX, ReplicationQuota, WindowedRate, throttled_partitions
from kwire.codecs.errors import ErrorCode


def test_a_reassignment_adds_the_target_first_and_removes_the_origin_left_out():
    a = ReplicaAssignment((1, 2, 3)).reassign_to([4, 2, 5])
    assert a == ReplicaAssignment((4, 2, 5, 1, 3), adding=(4, 5), removing=(1, 3))
    assert a.origin == (2, 1, 3) and a.target == (4, 2, 5) and a.in_progress


def test_a_new_target_during_a_move_keeps_the_original_replicas_as_its_origin():
    moving = ReplicaAssignment((1, 2)).reassign_to([3, 4])
    again = moving.reassign_to([5, 1])
    assert again.origin == (1, 2)
    assert again == ReplicaAssignment((5, 1, 2), adding=(5,), removing=(2,))


def test_a_cancellation_goes_back_to_the_origin_at_once():
    moving = ReplicaAssignment((1, 2)).reassign_to([2, 3])
    assert moving.cancelled() == ReplicaAssignment((2, 1))
    assert not moving.cancelled().in_progress


@pytest.mark.parametrize("target, code", [
    ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 1], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([-1], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ([1, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
])
def test_bad_targets_get_kafkas_errors(target, code):
    with pytest.raises(ReassignmentError) as caught:
        validate_target(target, ReplicaAssignment((1, 2)), {1, 2, 3})
    assert caught.value.code == code


def test_a_replication_factor_change_is_refused_when_the_request_does_not_allow_it():
    with pytest.raises(ReassignmentError) as caught:
        validate_target([1, 2, 3], ReplicaAssignment((1, 2)), {1, 2, 3}, allow_replication_factor_change=False)
    assert caught.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    validate_target([2, 3], ReplicaAssignment((1, 2)), {1, 2, 3}, allow_replication_factor_change=False)


def test_completion_waits_for_every_target_replica_in_the_isr_and_moves_the_leader_into_the_target():
    moving = ReplicaAssignment((3, 4, 1, 2), adding=(3, 4), removing=(1, 2))
    assert completion(moving, PartitionState(1, 5, (1, 2, 3), 1), {1, 2, 3, 4}) is None
    assert completion(moving, PartitionState(1, 5, (1, 2, 3, 4), 1), {1, 2, 3, 4}) == (3, (3, 4))
    # a target replica not live cannot lead: the next one does
    assert completion(moving, PartitionState(1, 5, (1, 2, 3, 4), 1), {1, 2, 4}) == (4, (3, 4))


def test_a_state_pointing_outside_the_replicas_after_a_cancellation_is_set_right():
    assert misplaced((1, 2), PartitionState(3, 4, (3, 1, 2), 1), {1, 2, 3}) == (1, (1, 2))
    assert misplaced((1, 2), PartitionState(1, 4, (1, 2), 1), {1, 2, 3}) is None


def test_the_controller_completes_in_one_step_with_a_new_epoch_and_the_assignment():
    view = ClusterView(brokers={1: None, 2: None, 3: None}, assignments={"t": {0: (3, 1, 2)}},
                       states={("t", 0): PartitionState(1, 7, (1, 2, 3), 1, 4)},
                       reassigning={("t", 0): ReplicaAssignment((3, 1, 2), adding=(3,), removing=(1, 2))})
    fixes, completed = Controller(2).on_reassignments(view)
    assert fixes == []
    changes, writes = completed["t"]
    assert changes == {0: ReplicaAssignment((3,))}
    assert [(w.state.leader, w.state.isr, w.state.leader_epoch, w.expected_version) for w in writes] == \
        [(3, (3,), 8, 4)]
    # a partition another decision wrote this round waits for the next
    assert Controller(2).on_reassignments(view, skip={("t", 0)}) == ([], {})
    after = apply_writes(view, writes)
    assert after.states[("t", 0)].leader == 3


def test_a_zookeeper_era_znode_starts_moves_and_keeps_entries_until_done():
    current = {("t", 0): ReplicaAssignment((1, 2)), ("t", 1): ReplicaAssignment((2, 3), adding=(3,), removing=(1,)),
               ("t", 2): ReplicaAssignment((3, 1))}
    starts, remaining = legacy_steps({("t", 0): (2, 3), ("t", 1): (2, 3), ("t", 2): (3, 1), ("gone", 0): (1,),
                                      ("t", 3): (9,)}, current, {1, 2, 3})
    assert starts == {("t", 0): ReplicaAssignment((2, 3, 1), adding=(3,), removing=(1,))}
    assert remaining == {("t", 0): (2, 3), ("t", 1): (2, 3)}


def test_the_windowed_rate_and_the_replication_quota():
    rate = WindowedRate(samples=2, window_ms=1000)
    rate.record(1000, 0)
    assert rate.rate(500) == 1000.0            # at least one whole window elapsed
    rate.record(3000, 1500)
    assert rate.rate(1000) == 4000.0
    assert rate.rate(2000) == 3000.0           # the first window left the two samples kept
    assert rate.rate(10_000) == 0.0            # the samples expired
    quota = ReplicationQuota(samples=2, window_ms=1000)
    quota.partitions = {("t", 0)}
    quota.record(10**9, 0)
    assert not quota.holds_back(("t", 0), 0), "an unset rate (Long.MAX) throttles nothing"
    quota.limit = 100
    quota.record(1000, 0)
    assert quota.holds_back(("t", 0), 100) and not quota.holds_back(("t", 1), 100)
    assert LONG_MAX == 2**63 - 1


def test_throttled_replica_lists_name_partitions_of_this_broker():
    assert throttled_partitions("0:1,1:2,2:1", 3, 1) == {0, 2}
    assert throttled_partitions("*", 3, 7) == {0, 1, 2}
    assert throttled_partitions("", 3, 1) == set()
