"""Metadata and FindCoordinator entries in cluster mode, from a ZooKeeper snapshot (no processes)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kwire.admin.broker_config import Listener
from kwire.admin.zk_layout import BrokerInfo, PartitionState
from kwire.cluster.topology import cluster_coordinator_entry
from kwire.cluster.topology import broker_entries, cluster_partition_entries, partition_entries
from kwire.cluster.zk import Snapshot, TopicMeta

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


# -- answers per listener: every broker's endpoint of the listener the client came through ----
LISTENER_NOT_FOUND = 72
COORDINATOR_NOT_AVAILABLE = 15


def secured(broker_id: int, *, internal_only: bool = False) -> BrokerInfo:
    endpoints = [Listener("INTERNAL", "10.0.0.%d" % broker_id, 9094, "SSL")]
    if not internal_only:
        endpoints.insert(0, Listener("CLIENT", "b%d.example" % broker_id, 9093, "SASL_SSL"))
    return BrokerInfo.of(broker_id, endpoints, rack="r%d" % broker_id)


def secured_snapshot() -> Snapshot:
    # broker 3 is live but registered no CLIENT listener (a rolling change of listeners)
    snap = snapshot([1, 2, 3], [1, 3])
    snap.brokers.update({1: secured(1), 2: secured(2), 3: secured(3, internal_only=True)})
    snap.topics["__consumer_offsets"] = TopicMeta({0: (3, 1, 2), 1: (1, 2, 3)}, None, 0)
    snap.states.update({("__consumer_offsets", p): PartitionState(leader, 1, (1, 2, 3), 1)
                        for p, leader in enumerate([3, 1])})
    return snap


def ctx(listener: str, api_key: int = 3, api_version: int = 9):
    cluster = SimpleNamespace(snapshot=secured_snapshot())
    return SimpleNamespace(listener=listener, api_key=api_key, api_version=api_version,
                           broker=SimpleNamespace(cluster=cluster, node_id=1))


def test_brokers_are_answered_with_the_endpoint_of_the_clients_listener():
    brokers, controller = broker_entries(ctx("CLIENT"))
    assert [(b["node_id"], b["host"], b["port"], b["rack"]) for b in brokers] == [
        (1, "b1.example", 9093, "r1"), (2, "b2.example", 9093, "r2")]      # 3 has no CLIENT endpoint
    internal, _ = broker_entries(ctx("INTERNAL"))
    assert [(b["host"], b["port"]) for b in internal] == [("10.0.0.1", 9094), ("10.0.0.2", 9094),
                                                          ("10.0.0.3", 9094)]


@pytest.mark.parametrize("api_version, code", [(5, LEADER_NOT_AVAILABLE), (6, LISTENER_NOT_FOUND),
                                               (12, LISTENER_NOT_FOUND)])
def test_a_leader_without_the_listener_is_not_named(api_version, code):
    topic = SimpleNamespace(name="t", partitions=[None, None])
    e = partition_entries(ctx("CLIENT", api_version=api_version), topic)
    assert (e[0]["error_code"], e[0]["leader_id"]) == (0, 1)
    assert (e[1]["error_code"], e[1]["leader_id"], e[1]["leader_epoch"]) == (code, -1, 4)
    assert e[1]["replica_nodes"] == [1, 2, 3] and e[1]["offline_replicas"] == []       # live, not offline
    assert partition_entries(ctx("INTERNAL"), topic)[1]["leader_id"] == 3


def test_find_coordinator_answers_the_coordinators_endpoint_of_the_clients_listener():
    c = ctx("CLIENT", api_key=10, api_version=3)
    c.broker.groups = SimpleNamespace(coordinator=SimpleNamespace(partition_for=lambda key, n: int(key)))
    found = cluster_coordinator_entry(c, "1")
    assert (found["node_id"], found["host"], found["port"], found["error_code"]) == (1, "b1.example", 9093, 0)
    # led by broker 3, which has no CLIENT endpoint: Kafka's getAliveBrokerNode finds none
    missing = cluster_coordinator_entry(c, "0")
    assert (missing["node_id"], missing["port"], missing["error_code"]) == (-1, -1, COORDINATOR_NOT_AVAILABLE)
