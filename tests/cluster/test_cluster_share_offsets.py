"""``kwire groups describe`` of a share group on the three-broker cluster: the group's
coordinator reads every share-partition's state from its share coordinator
(DescribeShareGroupOffsets), whichever brokers lead the partitions and the state."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from confluent_kafka import ShareConsumer

from tests.cluster.test_cluster_share_groups import produce, share_cluster, warm_up
from tests.support.counting import create_topic, wait_full_isrs


def test_a_share_group_is_described_with_start_offsets_and_lag_across_brokers(cluster_factory):
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
        done = subprocess.run([sys.executable, "-m", "kwire.tools.groups", "describe", "--group", group,
                               "--bootstrap-server", cluster.bootstrap, "--output", "json"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        [described] = json.loads(done.stdout)
        seen = {(p["partition"], p["start_offset"], p["lag"]) for p in described["partitions"]}
        if seen == {(0, 6, 4), (1, 6, 4), (2, 6, 4)}:
            break
        time.sleep(0.5)
    assert seen == {(0, 6, 4), (1, 6, 4), (2, 6, 4)}
    consumer.close()

