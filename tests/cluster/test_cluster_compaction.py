"""Compaction on the three-broker cluster: each replica cleans its own log, a follower that was
down while the leader cleaned catches up across the gaps the cleaner left, and after the leader
is killed the new leader serves the latest value of every key at its original offset."""
from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.support.counting import create_topic, partition_states, wait_for, wait_full_isrs

KEYS = 50
ROUNDS = 40


def produce_rounds(bootstrap: str, topic: str, rounds: range) -> dict[bytes, tuple[int, bytes]]:
    """Every key once per round, acks=all; the acknowledged (offset, value) of each key's last write."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    errors = []

    def done(err, msg):
        if err is not None:
            errors.append(err)
        else:
            latest[msg.key()] = (msg.offset(), msg.value())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for r in rounds:
        for k in range(KEYS):
            producer.produce(topic, key=b"key-%d" % k, value=b"value-%d-%d" % (k, r), partition=0, on_delivery=done)
        producer.flush(30)
    assert not errors, errors[:3]
    return latest


def read_partition(bootstrap: str, topic: str, timeout: float = 30) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == msg.error()._PARTITION_EOF:
                    break
                raise AssertionError(msg.error())
            got.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return got


def cleaned(records: list[tuple[int, bytes, bytes]]) -> bool:
    return len({k for _o, k, _v in records}) * 3 > len(records)     # few duplicates left


def test_a_follower_catches_up_over_the_leaders_gaps_and_serves_the_latest_values(cluster_factory):
    cluster = cluster_factory(3, properties={"log.cleaner.backoff.ms": "200"})
    topic = "compacted"
    create_topic(cluster.bootstrap, topic, partitions=1, rf=3, cleanup_policy="compact",
                 segment_bytes=4096, min_cleanable_dirty_ratio=0.01, min_insync_replicas=2)
    wait_full_isrs(cluster.zookeeper.connect, topic)
    state = partition_states(cluster.zookeeper.connect, topic)[0]
    leader = state["leader"]
    lagging, other = [i for i in state["isr"] if i != leader]
    latest = produce_rounds(cluster.bootstrap, topic, range(ROUNDS // 2))
    cluster.stop(lagging)
    latest.update(produce_rounds(cluster.live_bootstrap(), topic, range(ROUNDS // 2, ROUNDS)))
    wait_for(lambda: cleaned(read_partition(cluster.live_bootstrap(), topic)), 60, "the leader's cleaner")
    cluster.start_broker(lagging)
    wait_full_isrs(cluster.zookeeper.connect, topic, timeout=60)
    # leave the broker that caught up across the gaps as the only replica: it must serve
    cluster.stop(other)
    cluster.kill(leader)
    wait_for(lambda: partition_states(cluster.zookeeper.connect, topic)[0]["leader"] == lagging,
             60, f"broker {lagging} leading")
    got = read_partition(cluster.broker(lagging).bootstrap, topic)
    survivors = {k: (o, v) for o, k, v in got}
    assert survivors == latest, "the latest acknowledged value of every key, at its offset"
    offsets = [o for o, _k, _v in got]
    assert offsets == sorted(set(offsets))
