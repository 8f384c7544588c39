"""Transactions on the three-broker cluster through confluent-kafka: the coordinator of a
transactional id is the leader of its __transaction_state partition, markers reach partitions
led by other brokers through WriteTxnMarkers, and a kill -9 of the coordinator's broker in the
middle of a transaction loses nothing committed and lets nothing aborted through."""
from __future__ import annotations

import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kwire.groups.coordinator import partition_for
from tests.integration.test_transactions import commit_stream_through, consume_transform_produce
from tests.support.counting import create_topic, partition_states, wait_for, wait_full_isrs

TXN_TOPIC = "__transaction_state"


def txn_producer(bootstrap: str, transactional_id: str, **conf) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                         "transaction.timeout.ms": 6000, **conf})
    producer.init_transactions(60)
    return producer


def send(producer: Producer, topic: str, label: str, n: int, partitions: int = 3) -> list[bytes]:
    values = [f"{label}-{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % partitions)
    producer.flush(60)
    return values


def read_committed(bootstrap: str, topic: str, expect: int, partitions: int = 3, idle_s: float = 4.0,
                   timeout_s: float = 60) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    quiet = time.monotonic() + idle_s
    try:
        while time.monotonic() < deadline and (len(got) < expect or time.monotonic() < quiet):
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
            quiet = time.monotonic() + idle_s           # after `expect`, wait a little for extras
    finally:
        consumer.close()
    return got


def coordinator_of(cluster, transactional_id: str) -> int:
    states = partition_states(cluster.zookeeper.connect, TXN_TOPIC)
    return states[partition_for(transactional_id, len(states))]["leader"]


def test_commits_and_aborts_span_partitions_led_by_every_broker(cluster):
    topic, tid = "txn-spread", f"tid-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    leaders = {s["leader"] for s in wait_full_isrs(cluster.zookeeper.connect, topic).values()}
    assert len(leaders) >= 2, f"partitions led by {leaders}: markers would not cross brokers"
    producer = txn_producer(cluster.bootstrap, tid)
    kept = []
    for label, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        values = send(producer, topic, label, 60)
        if commit:
            producer.commit_transaction(60)
            kept += values
        else:
            producer.abort_transaction(60)
    assert sorted(read_committed(cluster.bootstrap, topic, len(kept))) == sorted(kept)


def test_kill_9_of_the_coordinator_mid_transaction_keeps_committed_and_drops_the_open_one(cluster):
    topic, tid = "txn-crash", f"tid-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=3, rf=3)
    wait_full_isrs(cluster.zookeeper.connect, topic)
    producer = txn_producer(cluster.bootstrap, tid)
    producer.begin_transaction()
    kept = send(producer, topic, "kept", 60)
    producer.commit_transaction(60)
    wait_full_isrs(cluster.zookeeper.connect, TXN_TOPIC)
    victim = coordinator_of(cluster, tid)
    producer.begin_transaction()
    send(producer, topic, "lost", 60)                    # open when its coordinator dies
    cluster.kill(victim)
    others = ",".join(cluster.broker(i).bootstrap for i in cluster.brokers if i != victim)
    wait_for(lambda: coordinator_of(cluster, tid) not in (victim, -1), 30, "a new transaction coordinator")
    # the new coordinator loaded the open transaction; a restarted producer fences and aborts it
    again = txn_producer(others, tid)
    again.begin_transaction()
    kept += send(again, topic, "after", 30)
    again.commit_transaction(60)
    seen = read_committed(others, topic, len(kept))
    assert sorted(seen) == sorted(kept), f"{len(seen)} read, {len(kept)} committed"
    assert not any(v.startswith(b"lost") for v in seen)


def test_consume_transform_produce_is_exactly_once_on_the_cluster(cluster):
    consume_transform_produce(cluster.bootstrap, replication_factor=3)


def test_kill_9_of_the_coordinator_during_a_stream_of_commits_keeps_every_transaction_whole(cluster):
    topic, probe = "txn-stream", f"tid-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, partitions=2, rf=3, min_insync_replicas=2)
    wait_full_isrs(cluster.zookeeper.connect, topic)
    txn_producer(cluster.bootstrap, probe)           # creates __transaction_state
    wait_full_isrs(cluster.zookeeper.connect, TXN_TOPIC)

    def crash(transactional_id: str) -> str:
        victim = coordinator_of(cluster, transactional_id)      # the stream's transaction coordinator
        cluster.kill(victim)
        return ",".join(cluster.broker(i).bootstrap for i in cluster.brokers if i != victim)
    commit_stream_through(cluster.bootstrap, topic, crash)
