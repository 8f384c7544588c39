"""Share groups (KIP-932) on the three-broker cluster through confluent-kafka's ShareConsumer.

Membership is served by the group's coordinator, ShareFetch/ShareAcknowledge by each
partition's leader, and the share-partitions' state by their share coordinator (the leader
of their ``__share_group_state`` partition), reached broker to broker by the persister RPCs.
Counted as a user would: every record read, each accepted one never again, none lost, when
a data partition's leader or a share coordinator dies (kill -9).

Group configs are per broker in cluster mode (not yet in ZooKeeper), so these tests start
their consumers on empty topics (share.auto.offset.reset latest starts at offset 0 there).
"""
from __future__ import annotations

import time
import uuid
import zlib
from collections import Counter

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from kafka.protocol.metadata import ApiVersionsRequest

from kwire.groups.share_records import SNAPSHOT_KEY, encode_key
from kwire.testing_cluster import send_request
from tests.support.counting import create_topic, partition_states, wait_for, wait_full_isrs

STATE_TOPIC = "__share_group_state"
SHARE_PROPERTIES = {"group.share.record.lock.duration.ms": 3000, "group.share.heartbeat.interval.ms": 500,
                    "group.share.min.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 6000,
                    "share.coordinator.state.topic.num.partitions": 3}


def share_cluster(cluster_factory):
    return cluster_factory(3, properties=SHARE_PROPERTIES)


def share_consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def produce(bootstrap: str, topic: str, n: int, partitions: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(start, start + n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def warm_up(consumers: dict, seconds: float = 4.0) -> None:
    """Let the members join and open their share-partitions (at the log end: offset 0)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers.values():
            assert not list(c.poll(0.2) or []), "nothing is produced yet"


def test_share_group_apis_are_advertised_in_cluster_mode(cluster):
    for i in cluster.brokers:
        response = send_request(cluster.broker(i).bootstrap, ApiVersionsRequest[3](
            client_software_name="t", client_software_version="1"))
        keys = {a.api_key for a in response.api_keys}
        assert {76, 77, 78, 79, 83, 84, 85, 86} <= keys, sorted(keys)


def test_share_consumers_on_three_brokers_get_every_record_once(cluster_factory):
    cluster = share_cluster(cluster_factory)
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    leaders = {s["leader"] for s in wait_full_isrs(cluster.zookeeper.connect, topic).values()}
    assert len(leaders) >= 2, f"partitions led by {leaders}"
    consumers = {name: share_consumer(cluster.bootstrap, group, topic, **{"max.poll.records": 20})
                 for name in "abc"}
    deliveries: list[tuple[str, int, int]] = []
    try:
        warm_up(consumers)
        produce(cluster.bootstrap, topic, 600, 3)
        deadline = time.monotonic() + 60
        while len({(p, o) for _, p, o in deliveries}) < 600 and time.monotonic() < deadline:
            for name, c in consumers.items():
                for msg in c.poll(0.2) or []:
                    assert msg.error() is None, msg.error()
                    deliveries.append((name, msg.partition(), msg.offset()))
    finally:
        for c in consumers.values():
            c.close()
    counts = Counter((p, o) for _, p, o in deliveries)
    assert sorted(counts) == sorted((p, o) for p in range(3) for o in range(200))
    assert set(counts.values()) == {1}, "implicit acknowledgement: each record delivered once"
    assert len({name for name, _, _ in deliveries}) >= 2, Counter(name for name, _, _ in deliveries)
