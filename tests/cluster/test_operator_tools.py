"""``kwire topics describe`` on a three-broker cluster: every replica's size comes from its own
broker's DescribeLogDirs, and a stopped broker shows up as under-replicated partitions."""
from __future__ import annotations

import json
import os
import pathlib

from kafka import KafkaProducer

from kwire.tools.topics import main

RECORDS = 50


def describe(cluster, capsys, *argv: str) -> list[dict]:
    code = main(["describe", "--topic", "replicated", *argv, "--output", "json",
                 "--bootstrap-server", cluster.live_bootstrap()])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)["topics"]


def segment_bytes(cluster, broker_id: int, partition: int) -> int:
    folder = pathlib.Path(cluster.brokers[broker_id].data_dir, "logs", f"replicated-{partition}")
    return sum(f.stat().st_size for f in folder.glob("*.log"))


def test_describe_shows_every_replicas_size_and_under_replicated_partitions(cluster, capsys):
    assert main(["create", "--topic", "replicated", "--partitions", "2", "--replication-factor", "3",
                 "--bootstrap-server", cluster.bootstrap]) == 0
    capsys.readouterr()
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    futures = [producer.send("replicated", b"v" * 100, partition=i % 2) for i in range(2 * RECORDS)]
    producer.flush(30)
    for f in futures:
        f.get(10)
    producer.close()

    def caught_up():
        topics = describe(cluster, capsys)
        parts = topics[0]["partitions"] if topics else []
        done = all(len(p["replica_sizes"]) == 3 and len(set(p["replica_sizes"].values())) == 1 for p in parts)
        return parts if parts and done else None
    parts = cluster.wait_for(caught_up, timeout=30, what="every replica at the leader's size")
    for p in parts:
        assert sorted(p["replicas"]) == sorted(p["isr"]) == [1, 2, 3]
        assert p["log_end_offset"] == RECORDS
        assert p["size_bytes"] == p["replica_sizes"][str(p["leader"])] > RECORDS * 100
        for broker_id in (1, 2, 3):
            assert p["replica_sizes"][str(broker_id)] == segment_bytes(cluster, broker_id, p["partition"])
    assert describe(cluster, capsys, "--under-replicated-partitions") == []

    cluster.stop(3)

    def under_replicated():
        return describe(cluster, capsys, "--under-replicated-partitions") or None
    [topic] = cluster.wait_for(under_replicated, timeout=40, what="partitions without broker 3 in their ISR")
    assert {p["partition"] for p in topic["partitions"]} == {0, 1}
    for p in topic["partitions"]:
        assert 3 not in p["isr"] and p["leader"] in (1, 2)
        assert sorted(p["replica_sizes"]) == ["1", "2"]         # the stopped broker is not asked
        assert p["log_end_offset"] == RECORDS
    assert os.path.isdir(os.path.join(cluster.brokers[3].data_dir, "logs", "replicated-0"))
