"""Metadata partition entries in cluster mode, from a ZooKeeper snapshot (no processes)."""
from __future__ import annotations

from types import SimpleNamespace

from kwire.admin.zk_layout import BrokerInfo, PartitionState
from kwire.handlers.metadata import cluster_partition_entries
from kwire.zk import Snapshot, TopicMeta

LEADER_NOT_AVAILABLE = 5


def snapshot(live: list[int], leaders: list[int]) -> Snapshot:
    return Snapshot(
        brokers={i: BrokerInfo(i, "127.0.0.1", 9090 + i) for i in live}, controller_id=live[0],
        topics={"t": TopicMeta({p: (1, 2, 3) for p in range(len(leaders))}, None, 0)}, configs={},
        states={("t", p): PartitionState(leader, 4, (1, 2, 3), 1) for p, leader in enumerate(leaders)},
        deleting=set(), shutting_down=set())


def entries(snap: Snapshot, partitions: int) -> list[dict]:
    return cluster_partition_entries(snap, SimpleNamespace(name="t", partitions=[None] * partitions))


def test_live_leaders_are_named_with_their_epoch_and_offline_replicas():
    e = entries(snapshot([1, 2], [1, 2]), 2)
    assert [(x["error_code"], x["leader_id"], x["leader_epoch"]) for x in e] == [(0, 1, 4), (0, 2, 4)]
    assert e[0]["offline_replicas"] == [3] and e[0]["replica_nodes"] == [1, 2, 3]


def test_a_leader_missing_from_the_live_brokers_is_not_named():
    # broker 1's session expired; the controller has not written the new states yet
    e = entries(snapshot([2, 3], [1, 2]), 2)
    assert (e[0]["error_code"], e[0]["leader_id"]) == (LEADER_NOT_AVAILABLE, -1)
    assert e[0]["offline_replicas"] == [1]
    assert (e[1]["error_code"], e[1]["leader_id"]) == (0, 2)
