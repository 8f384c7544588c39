"""Apache Kafka's KafkaConsumer (Java client 4.0) against kwire: ``tests/java/JcConsumer.java``.

One JVM run per module: assign and seek, offsetsForTimes, commits, classic-protocol groups
(range, cooperative-sticky, static membership, a rebalance between two consumers) and
read_committed over a Java transactional producer.  Group members commit after every poll,
so "exactly once" below means: each record reached one member, once."""
from __future__ import annotations

from collections import Counter

import pytest

from tests.java_client.conftest import run_checks

BASE = 1_700_000_000_000            # JcConsumer.BASE: record i of each partition is BASE + i s


@pytest.fixture(scope="module")
def consumer(kwire_broker, tmp_path_factory):
    return run_checks(tmp_path_factory, "JcConsumer", kwire_broker.bootstrap, timeout=240)


def test_assign_seek_position_and_offsets_for_times(consumer):
    r = consumer["assign_seek"]
    assert r["assignment"] == [0, 1, 2]
    assert r["beginning"] == {"0": 0, "1": 0, "2": 0}
    assert r["end"] == {"0": 10, "1": 10, "2": 10}
    # seek(p0, 5), seekToEnd(p1), seekToBeginning(p2)
    assert r["positions_before_poll"] == {"0": 5, "1": 10, "2": 0}
    assert r["polled_offsets"] == {"0": list(range(5, 10)), "2": list(range(10))}
    assert r["offsets_for_times"] == {"0": {"offset": 4, "timestamp": BASE + 4000},
                                      "1": {"offset": 0, "timestamp": BASE},
                                      "2": None}
    assert r["after_time_seek"] == {"offset": 4, "timestamp": BASE + 4000, "value": "0-4"}
    assert r["past_end_reset_none"] == "OffsetOutOfRangeException"


def test_commit_sync_commit_async_committed_and_position(consumer):
    r = consumer["commits"]
    assert r["committed_new_group"] == {"0": None, "1": None, "2": None}
    assert r["first_read"] == 30
    assert r["positions"] == {"0": 10, "1": 10, "2": 10}
    assert r["after_commit_sync_all"] == {p: {"offset": 10, "metadata": ""} for p in "012"}
    assert r["commit_async_callback"] == "ok {1={offset=6, metadata=m6}}"
    assert r["after_commits"] == {"0": {"offset": 4, "metadata": "m4"}, "1": {"offset": 6, "metadata": "m6"},
                                  "2": {"offset": 10, "metadata": ""}}
    # a new consumer of the group starts where the group committed
    assert r["resumed_offsets"] == {"0": list(range(4, 10)), "1": list(range(6, 10))}
    assert r["resumed_positions"] == {"0": 10, "1": 10, "2": 10}


def records_once(*members: dict, per_partition: dict[str, int]) -> None:
    counts = Counter()
    for m in members:
        for p, offsets in m["records"].items():
            counts.update((p, o) for o in offsets)
    assert sorted(counts) == sorted((p, o) for p, n in per_partition.items() for o in range(n))
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]


def changes(member: dict) -> list:
    """A member's assignment events, without the commits it deferred during a rebalance."""
    return [e for e in member["events"] if e[0] != "commit_deferred"]


def two_member_checks(r: dict, assignor: str) -> None:
    assert r["a_alone"] is True and r["a_alone_owns"] == [0, 1, 2, 3]
    assert r["shared"] is True, (r["a_after_join"], r["b_after_join"])
    a, b = r["a_after_join"], r["b_after_join"]
    assert sorted(a["owns"] + b["owns"]) == [0, 1, 2, 3] and len(a["owns"]) == len(b["owns"]) == 2
    assert a["error"] is None and b["error"] is None
    desc = r["group_description"]
    assert (desc["state"], desc["assignor"]) == ("Stable", assignor)
    assert [(m["client_id"], m["assignment"]) for m in desc["members"]] == [("a", a["owns"]), ("b", b["owns"])]
    # 5 records per partition before B joined, 10 more after: each read once by the group,
    # the later ones by the partition's owner
    assert r["total_records"] == 60
    records_once(a, b, per_partition={str(p): 15 for p in range(4)})
    for p in b["owns"]:
        assert b["records"][str(p)][-10:] == list(range(5, 15))
    # B leaves (LeaveGroup): A owns everything again
    assert r["a_regains_all"] is True and r["a_final"]["owns"] == [0, 1, 2, 3]


def test_two_consumers_range_assignor_rebalance(consumer):
    r = consumer["group_range"]
    two_member_checks(r, "range")
    # eager protocol: A gives up everything, then gets its half back
    assert changes(r["a_after_join"])[:3] == [["assigned", [0, 1, 2, 3]], ["revoked", [0, 1, 2, 3]],
                                               ["assigned", r["a_after_join"]["owns"]]]


def test_two_consumers_cooperative_sticky_rebalance(consumer):
    r = consumer["group_cooperative"]
    two_member_checks(r, "cooperative-sticky")
    a = r["a_after_join"]
    # incremental: A only ever gives up the partitions B gets, and keeps the rest throughout
    revoked = [parts for kind, parts in changes(a) if kind in ("revoked", "lost")]
    assert revoked == [r["b_after_join"]["owns"]]
    assert changes(a)[0] == ["assigned", [0, 1, 2, 3]]


def test_static_membership_restart_within_session_timeout_keeps_assignment_without_rebalance(consumer):
    r = consumer["group_static"]
    assert r["stable"] is True
    members = r["group_description"]["members"]
    assert [(m["client_id"], m["instance_id"]) for m in members] == [("a", "instance-a"), ("b", "instance-b")]
    # close() of a static member sends no LeaveGroup: the group still holds it
    assert r["after_a_closed"]["members"] == members
    # a new consumer with the same group.instance.id takes over its partitions ...
    assert r["a2_assigned"] is True
    assert r["a2"]["owns"] == r["a_owned"]
    # ... and the other member never rebalanced
    assert r["b_events_during_restart"] == []
    assert r["b_generation_after"] == r["b_generation_before"]
    assert r["records_after_restart"] == 20


def test_read_committed_against_a_java_transactional_producer(consumer):
    r = consumer["read_committed"]
    five = lambda label: [f"{label}-{i}" for i in range(5)]          # noqa: E731
    # log: c1 (committed) a2 (aborted) plain (no transaction) c3 (committed) open, with a
    # marker after each transaction: c1 0-4, marker 5, a2 6-10, marker 11, plain 12-16,
    # c3 17-21, marker 22, open 23-27
    assert r["uncommitted_values"] == five("c1") + five("a2") + five("plain") + five("c3") + five("open")
    assert r["uncommitted_end_open"] == 28
    # the open transaction holds the last stable offset at its first record
    assert r["committed_end_open"] == 23 and r["committed_position_open"] == 23
    assert r["committed_values_open"] == five("c1") + five("plain") + five("c3")
    # once it commits, read_committed reads on to the new end (after its marker)
    assert r["committed_end_after"] == 29
    assert r["committed_values_after"] == five("open")
    assert consumer["done"]["ok"]
