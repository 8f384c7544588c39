"""Client quotas in a cluster live in ZooKeeper (/config/users, /config/clients), as in a
ZooKeeper-era Kafka: altered through broker 1, broker 3 describes and enforces them; a user's
SCRAM credentials and quotas share its znode and neither write loses the other's keys.
Quotas are set with AlterClientQuotas (kafka-python's protocol classes), credentials with
``kwire scram``; enforcement is seen by a librdkafka producer writing to a partition broker 3
leads."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from kafka.protocol.admin import DescribeUserScramCredentialsRequest
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.admin.topics import CreateTopicsRequest
from kazoo.client import KazooClient

from kwire.testing.cluster import send_request
from tests.support.counting import wait_for

QUOTA = 150_000


def alter(address: str, entity: dict, values: dict) -> int:
    E = AlterClientQuotasRequest.EntryData
    response = send_request(address, AlterClientQuotasRequest[1](entries=[E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[E.OpData(key=k, value=float(v or 0), remove=v is None) for k, v in values.items()])],
        validate_only=False), timeout=15)
    return response.entries[0].error_code


def described(address: str) -> dict:
    response = send_request(address, DescribeClientQuotasRequest[1](components=[], strict=False))
    assert response.error_code == 0
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def scram_users(address: str) -> dict:
    response = send_request(address, DescribeUserScramCredentialsRequest[0](users=None)).to_dict()
    return {r["user"]: sorted(c["mechanism"] for c in r["credential_infos"]) for r in response["results"]}


def kwire_scram(bootstrap: str, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "kwire", "scram", "--bootstrap-server", bootstrap,
                           "--timeout-ms", "15000", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def znode(cluster, path: str) -> dict:
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=15)
    try:
        return json.loads(zk.get(path)[0])
    finally:
        zk.stop()
        zk.close()


def test_quota_altered_on_broker_1_is_enforced_on_broker_3_and_scram_keys_survive(cluster_factory):
    cluster = cluster_factory(3, properties={"quota.window.num": 2})
    b1, b3 = cluster.broker(1).bootstrap, cluster.broker(3).bootstrap

    # SCRAM first, then a quota for the same user: both keys in /config/users/alice
    kwire_scram(b1, "set", "--user", "alice", "--password", "alice-secret")
    assert alter(b1, {"user": "alice"}, {"producer_byte_rate": 4096, "request_percentage": 200}) == 0
    config = znode(cluster, "/config/users/alice")["config"]
    assert sorted(config) == ["SCRAM-SHA-256", "producer_byte_rate", "request_percentage"]
    assert (config["producer_byte_rate"], config["request_percentage"]) == ("4096", "200.0")
    # a credential written after the quota keeps it, and a quota removal keeps the credential
    kwire_scram(cluster.broker(2).bootstrap, "set", "--user", "alice", "--mechanism", "SCRAM-SHA-512",
                "--password", "alice-512")
    assert alter(b3, {"user": "alice"}, {"request_percentage": None}) == 0
    assert znode(cluster, "/config/users/alice")["config"].keys() == {"SCRAM-SHA-256", "SCRAM-SHA-512",
                                                                     "producer_byte_rate"}
    wait_for(lambda: scram_users(b3) == {"alice": [1, 2]}, 10, "broker 3 to know both credentials")

    assert alter(b1, {"client-id": "cq-producer"}, {"producer_byte_rate": QUOTA}) == 0
    assert znode(cluster, "/config/clients/cq-producer") == {"version": 1, "config": {"producer_byte_rate": str(QUOTA)}}
    assert alter(b1, {"user": None, "client-id": None}, {"consumer_byte_rate": 10_000_000}) == 0
    assert znode(cluster, "/config/users/<default>/clients/<default>")["config"] == {"consumer_byte_rate": "10000000"}
    expected = {(("user", "alice"),): {"producer_byte_rate": 4096.0},
                (("client-id", "cq-producer"),): {"producer_byte_rate": float(QUOTA)},
                (("client-id", None), ("user", None)): {"consumer_byte_rate": 10_000_000.0}}
    wait_for(lambda: described(b3) == expected, 10, "broker 3 to describe the quotas")

    # a partition led by broker 3, written by a client under the quota
    topic = f"cq-{uuid.uuid4().hex[:8]}"
    T = CreateTopicsRequest[7].CreatableTopic
    created = send_request(b1, CreateTopicsRequest[7](topics=[T(
        name=topic, num_partitions=-1, replication_factor=-1,
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=[3])], configs=[])],
        timeout_ms=15000, validate_only=False), timeout=20)
    assert created.topics[0].error_code == 0, created
    throttles, acked = [], []
    lock = threading.Lock()

    def delivered(err, msg):
        assert err is None, err
        with lock:
            acked.append((time.monotonic(), len(msg.value())))

    producer = Producer({"bootstrap.servers": b3, "client.id": "cq-producer", "linger.ms": 5, "batch.size": 16384,
                         "queue.buffering.max.kbytes": 256, "acks": "all",
                         "throttle_cb": lambda e: throttles.append((time.monotonic(), e.throttle_time))})
    value, sent = b"q" * 1000, 0
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, on_delivery=delivered)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    stopped = time.monotonic()
    assert producer.flush(30) == 0
    throttles = [t for t in throttles if t[1] > 0]
    assert throttles, "broker 3 did not throttle the client"
    first = throttles[0][0]
    # from the first throttle to the last ack (the flush included): a window cut at the stop
    # drops the bytes whose acks a throttle delayed past it, and read low on a busy machine
    last = max(at for at, _ in acked)
    rate = sum(size for at, size in acked if at >= first) / max(last - first, stopped - first)
    assert 0.7 * QUOTA <= rate <= 1.3 * QUOTA, f"{rate:.0f} B/s against {QUOTA} B/s"
    assert len(acked) == sent

    consumer = Consumer({"bootstrap.servers": b3, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 30
    while read < sent and time.monotonic() < deadline:
        read += sum(1 for m in consumer.consume(1000, 0.5) if m.error() is None)
    consumer.close()
    assert read == sent

    # lifting the quota on broker 2 reaches broker 3
    assert alter(cluster.broker(2).bootstrap, {"client-id": "cq-producer"}, {"producer_byte_rate": None}) == 0
    expected.pop((("client-id", "cq-producer"),))
    wait_for(lambda: described(b3) == expected, 10, "broker 3 to drop the quota")
    assert scram_users(b3) == {"alice": [1, 2]}
