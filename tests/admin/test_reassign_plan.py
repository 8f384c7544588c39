"""kwire reassign's planning, without a broker: Kafka's JSON, --generate, --throttle, --drain-broker, --wait."""
from __future__ import annotations

import json
import random

import pytest

from kwire.admin.reassign_plan import (PartitionMove, PlanError, broker_racks, bytes_remaining, drain_plan,
                                       involved_brokers, log_dir_move_states, merge_throttled, move_map,
                                       parse_broker_list, parse_reassignment, parse_reassignment_and_dirs,
                                       parse_topics_to_move, propose, reassignment_json, throttled_replicas)
from kwire.admin.reassignment import ReplicaAssignment


def test_reassignment_json_round_trips_in_kafkas_compact_form():
    text = reassignment_json({("b", 1): (3, 1), ("a", 0): (1, 2)})
    assert text == ('{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"b","partition":1,"replicas":[3,1],"log_dirs":["any","any"]}]}')
    assert parse_reassignment(text) == {("a", 0): (1, 2), ("b", 1): (3, 1)}
    # log_dirs and version are optional, as in Kafka
    assert parse_reassignment('{"partitions":[{"topic":"t","partition":2,"replicas":[2]}]}') == {("t", 2): (2,)}


def test_log_dirs_name_a_replicas_dir_and_verify_reports_each_move_in_kafkas_words():
    targets, dirs = parse_reassignment_and_dirs(
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","/d/b"]},'
        '{"topic":"u","partition":3,"replicas":[3],"log_dirs":["/d/a"]}]}')
    assert targets == {("t", 0): (1, 2), ("u", 3): (3,)}
    assert dirs == {("t", 0, 2): "/d/b", ("u", 3, 3): "/d/a"}
    wanted = {("t", 0, 2): "/d/b", ("u", 3, 3): "/d/a", ("v", 0, 2): "/d/b", ("w", 0, 2): "/d/b",
              ("x", 0, 2): "/d/b", ("y", 0, 4): "/d/a"}
    found = {2: {("t", 0): ("/d/a", "/d/b"), ("v", 0): ("/d/b", None), ("w", 0): ("/d/a", "/d/c"),
                 ("x", 0): ("/d/a", None)},
             3: {}, 4: None}
    assert log_dir_move_states(wanted, found) == {
        ("t", 0, 2): (True, "Reassignment of replica t-0-2 is still in progress."),
        ("u", 3, 3): (False, "Partition u-3 cannot be found in any live log directory on broker 3."),
        ("v", 0, 2): (False, "Reassignment of replica v-0-2 completed successfully."),
        ("w", 0, 2): (True, "Partition w-0 on broker 2 is being moved to log dir /d/c instead of /d/b."),
        ("x", 0, 2): (False, "Partition x-0 on broker 2 is not being moved from log dir /d/a to /d/b."),
        ("y", 0, 4): (False, "Partition y-0 is not found in any live log dir on broker 4. There is likely an "
                             "offline log directory on the broker."),
    }


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ("[1]", "must be a JSON object"),
    ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
    ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "Partition replica list cannot be empty"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1,2]}]}',
     "may not contain duplicate entries: t-0 contains multiple entries for 1"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
     "duplicate topic partitions: t-0"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
     "Size of replicas list [1, 2] is different from size of log dirs list"),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["data"]}]}',
     'log dir \'data\' must be "any" or an absolute path'),
    ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', '"partition" must be an integer'),
    ('{"partitions":[{"partition":0,"replicas":[1]}]}', 'needs a "topic"'),
    ('{"partitions":[{"topic":"t","partition":0,"replicas":"1,2"}]}', "must be a list of broker ids"),
])
def test_a_bad_reassignment_file_is_refused_with_a_message(text, message):
    with pytest.raises(PlanError, match=None) as caught:
        parse_reassignment(text)
    assert message in str(caught.value)


def test_topics_to_move_and_broker_list():
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]
    for bad, message in (('{"topics":[{"topic":"a"},{"topic":"a"}]}', "duplicate entries: a"),
                         ('{"topics":[]}', "names no topic"), ('{"topics":[{}]}', 'needs a "topic"')):
        with pytest.raises(PlanError) as caught:
            parse_topics_to_move(bad)
        assert message in str(caught.value)
    assert parse_broker_list("1, 2,3") == [1, 2, 3]
    for bad, message in (("1,2,1", "duplicate entries: 1"), ("1,x", "expected broker ids"), ("", "no broker")):
        with pytest.raises(PlanError) as caught:
            parse_broker_list(bad)
        assert message in str(caught.value)


def test_generate_spreads_each_topic_over_the_given_brokers_keeping_its_shape():
    current = {("t", p): (1, 2) for p in range(4)} | {("u", 0): (1,)}
    proposal = propose(current, {3: None, 4: None, 5: None}, rng=random.Random(7))
    assert set(proposal) == set(current)
    assert all(len(proposal[tp]) == len(current[tp]) and set(proposal[tp]) <= {3, 4, 5} for tp in current)
    assert all(len(set(r)) == len(r) for r in proposal.values())
    # leaders spread: four partitions over three brokers, no broker leads more than two
    leaders = [proposal[("t", p)][0] for p in range(4)]
    assert max(leaders.count(b) for b in (3, 4, 5)) == 2
    with pytest.raises(PlanError, match="larger than available brokers"):
        propose({("t", 0): (1, 2, 3)}, {1: None, 2: None})


def test_generate_is_rack_aware_only_when_every_broker_has_a_rack():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    proposal = propose({("t", p): (1, 2) for p in range(8)}, broker_racks(racks, True), rng=random.Random(1))
    assert all(len({racks[b] for b in r}) == 2 for r in proposal.values()), proposal
    with pytest.raises(PlanError, match="--disable-rack-aware"):
        broker_racks({1: "a", 2: None}, True)
    assert broker_racks({1: "a", 2: None}, False) == {1: None, 2: None}


def test_throttles_name_the_sources_as_leaders_and_the_new_replicas_as_followers():
    # t-0 moves 1,2 -> 2,3; t-1 is already moving (origin 1,3, adding 2) and is resubmitted to 3,4
    moving = {("t", 1): ReplicaAssignment((2, 1, 3), adding=(2,), removing=(1,))}
    moves = move_map(moving, {("t", 0): (2, 3), ("t", 1): (3, 4)}, {("t", 0): (1, 2), ("t", 1): (2, 1, 3)})
    assert moves == {("t", 0): PartitionMove(frozenset({1, 2}), frozenset({3})),
                     ("t", 1): PartitionMove(frozenset({1, 3}), frozenset({4}))}
    leader, follower = throttled_replicas(moves)
    assert leader == {"t": {"0:1", "0:2", "1:1", "1:3"}} and follower == {"t": {"0:3", "1:4"}}
    assert involved_brokers(moves) == {1, 2, 3, 4}
    with pytest.raises(PlanError, match="Unable to find partition: t-9"):
        move_map({}, {("t", 9): (1,)}, {})


def test_throttle_configs_merge_with_what_the_topic_has():
    assert merge_throttled(None, {"1:3", "0:2"}) == "0:2,1:3"
    assert merge_throttled("10:1, 0:2", {"2:3", "0:2"}) == "0:2,2:3,10:1"
    assert merge_throttled("*", {"0:1"}) == "*"


def test_drain_moves_every_replica_to_the_least_loaded_broker_in_the_drained_ones_place():
    assignment = {("t", 0): (1, 2), ("t", 1): (2, 1), ("t", 2): (1, 3), ("u", 0): (2, 3), ("u", 1): (4, 2)}
    live = {1: None, 2: None, 3: None, 4: None}
    plan = drain_plan(assignment, 2, live)
    assert set(plan) == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    assert all(2 not in r and len(r) == len(assignment[tp]) and len(set(r)) == len(r) for tp, r in plan.items())
    # the replacement takes broker 2's position: its other replicas keep theirs
    assert plan[("t", 0)][0] == 1 and plan[("t", 1)][1] == 1 and plan[("u", 1)][0] == 4
    # loads before: 1 -> 3, 3 -> 2, 4 -> 1; four moves land so that no broker ends far above another
    after = {b: sum(b in r for r in {**assignment, **plan}.values()) for b in (1, 3, 4)}
    assert max(after.values()) - min(after.values()) <= 1, after
    assert drain_plan(assignment, 9, live) == {}


def test_drain_prefers_a_rack_the_partition_does_not_use_and_refuses_when_nowhere_is_left():
    live = {1: "a", 2: "b", 3: "a", 4: "b"}
    # t-0 on 1 (rack a) and 2 (rack b): draining 2 must pick 4 (rack b), though 3 holds nothing
    assert drain_plan({("t", 0): (1, 2), ("x", 0): (4,)}, 2, live) == {("t", 0): (1, 4)}
    assert drain_plan({("t", 0): (1, 2), ("x", 0): (4,)}, 2, broker_racks(live, False)) == {("t", 0): (1, 3)}
    with pytest.raises(PlanError, match="Cannot drain broker 3: partition t-0 .* every other live broker"):
        drain_plan({("t", 0): (1, 2, 3)}, 3, {1: None, 2: None, 3: None})
    # a dead broker drains too: it is just not a candidate
    assert drain_plan({("t", 0): (1, 2)}, 2, {1: None, 3: None}) == {("t", 0): (1, 3)}


def test_bytes_remaining_is_the_leaders_size_minus_each_adding_replicas():
    moving = {("t", 0): ReplicaAssignment((1, 2, 3, 4), adding=(3, 4), removing=(1,)),
              ("t", 1): ReplicaAssignment((2, 3), adding=(3,), removing=(2,))}
    sizes = {("t", 0): {1: 1000, 2: 990, 3: 400}, ("t", 1): {2: 50, 3: 80}}
    left = bytes_remaining(moving, {("t", 0): 1, ("t", 1): -1}, sizes)
    # t-0: (1000 - 400) + (1000 - 0); t-1's leader unknown: the largest copy (80) stands in
    assert left == {("t", 0): 1600, ("t", 1): 0}
    assert json.loads(reassignment_json({("t", 0): (1,)}))["version"] == 1
