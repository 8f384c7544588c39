"""``kwire groups`` on a share group on the three-broker cluster: the group's coordinator
reads every share-partition's state from its share coordinator (DescribeShareGroupOffsets),
and once the group is empty moves it (AlterShareGroupOffsets, ``reset-offsets``) and deletes
it (DeleteShareGroupOffsets, ``delete-offsets``), whichever brokers lead the partitions and
the state."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from confluent_kafka import ShareConsumer

from tests.cluster.test_cluster_share_groups import produce, share_cluster, warm_up
from tests.support.counting import create_topic, wait_full_isrs


def kwire_groups(cluster, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kwire.tools.groups", *argv,
                           "--bootstrap-server", cluster.bootstrap], capture_output=True, text=True, timeout=60)


def described(cluster, group: str) -> set[tuple[int, int | None, int | None]]:
    """{(partition, start offset, lag)} of the group's share-partitions."""
    done = kwire_groups(cluster, "describe", "--group", group, "--output", "json")
    assert done.returncode == 0, done.stderr
    [group_doc] = json.loads(done.stdout)
    return {(p["partition"], p["start_offset"], p["lag"]) for p in group_doc["partitions"]}


def test_a_share_group_is_described_reset_and_deleted_across_brokers(cluster_factory):
    cluster = share_cluster(cluster_factory)
    topic, group = f"share-offsets-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    wait_full_isrs(cluster.zookeeper.connect, topic)
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    warm_up({"c": consumer})
    produce(cluster.bootstrap, topic, 18, partitions=3)           # offsets 0-5 of each partition
    accepted, deadline = 0, time.monotonic() + 30
    while accepted < 18 and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if not message.error():
                consumer.acknowledge(message)
                accepted += 1
        consumer.commit_sync()
    assert accepted == 18
    produce(cluster.bootstrap, topic, 12, partitions=3, start=18)  # 4 more each, not read yet

    # the lag is counted against the describing broker's replica, whose high watermark may
    # trail the leader's by a follower fetch (replica.fetch.wait.max.ms): look again briefly
    deadline, seen = time.monotonic() + 10, None
    while time.monotonic() < deadline:
        seen = described(cluster, group)
        if seen == {(0, 6, 4), (1, 6, 4), (2, 6, 4)}:
            break
        time.sleep(0.5)
    assert seen == {(0, 6, 4), (1, 6, 4), (2, 6, 4)}
    refused = kwire_groups(cluster, "reset-offsets", "--group", group, "--all-topics", "--to-offset", "2",
                           "--execute")
    assert refused.returncode == 1 and f"Share group '{group}' is not empty." in refused.stderr
    consumer.close()

    done = kwire_groups(cluster, "reset-offsets", "--group", group, "--all-topics", "--to-offset", "2", "--execute")
    assert done.returncode == 0, done.stderr
    assert described(cluster, group) == {(0, 2, 8), (1, 2, 8), (2, 2, 8)}
    done = kwire_groups(cluster, "delete-offsets", "--group", group, "--topic", topic)
    assert done.returncode == 0 and "Successful" in done.stdout, done.stderr
    assert {start for _, start, _ in described(cluster, group)} <= {None}      # no state left

