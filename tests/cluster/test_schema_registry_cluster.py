"""The Schema Registry on a 3-broker cluster whose _schemas has 2 replicas: every broker serves
it; writes through any broker land on the primary (the leader of _schemas-0), reads through the
broker without a copy go there too, ids stay unique and survive restarts; schema validation on
the produce path works on every broker, the one without a copy (it mirrors _schemas-0) and the
follower, right after a registration and after a restart."""
from __future__ import annotations

import json
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kwire.testing.cluster import ClusterProcess
from tests.cluster.conftest import require_zookeeper
from tests.support.broker import free_port, wait_port


@pytest.fixture(scope="module")
def registry_cluster():
    """Three brokers, each serving a registry; _schemas gets 2 replicas, so one broker has no
    copy of it (which one is known once the first write has created it)."""
    require_zookeeper()
    cluster = ClusterProcess(3, properties={"schema.registry.topic.replication.factor": 2})
    urls = {}
    for i, broker in cluster.brokers.items():
        port = free_port()
        broker.properties["schema.registry.listeners"] = f"http://127.0.0.1:{port}"
        urls[i] = f"http://127.0.0.1:{port}"
    try:
        cluster.start()
        cluster.wait_until_ready()
        for url in urls.values():
            wait_port("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=30)
        cluster.registry_urls = urls
        yield cluster
    finally:
        cluster.close()


def record(name: str, *fields: str) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name,
                              "fields": [{"name": f, "type": "string", "default": ""} for f in fields]}), "AVRO")


def eventually(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_writes_through_any_broker_get_unique_ids_that_every_broker_serves_and_a_restart_keeps(registry_cluster):
    clients = {i: SchemaRegistryClient({"url": url}) for i, url in registry_cluster.registry_urls.items()}
    ids = {}
    for i, client in clients.items():            # one write through each broker, primary or not
        ids[i] = client.register_schema(f"subject-{i}", record(f"R{i}", "a"))
    assert len(set(ids.values())) == 3            # one allocator: no id given twice
    # an evolution through another broker is checked against the same history
    evolved = clients[2].register_schema("subject-1", record("R1", "a", "b"))
    assert evolved > max(ids.values())
    ids["evolved"] = evolved

    def every_broker_serves_all():
        for client in (SchemaRegistryClient({"url": u}) for u in registry_cluster.registry_urls.values()):
            assert sorted(client.get_subjects()) == ["subject-1", "subject-2", "subject-3"]
            assert client.get_versions("subject-1") == [1, 2]
            for schema_id in ids.values():
                assert client.get_schema(schema_id) is not None
    eventually(every_broker_serves_all)

    # a full restart of every broker keeps every id and version
    for i in registry_cluster.brokers:
        registry_cluster.stop(i)
    for i in registry_cluster.brokers:
        registry_cluster.start_broker(i)
    registry_cluster.wait_until_ready()
    eventually(every_broker_serves_all, timeout=30)
    fresh = SchemaRegistryClient({"url": registry_cluster.registry_urls[3]})
    new_id = eventually(lambda: fresh.register_schema("subject-4", record("R4", "z")), timeout=30)
    assert new_id > max(ids.values())


def schemas_roles(cluster) -> tuple[int, int, int]:
    """(leader, follower, broker without a copy) of _schemas-0."""
    p = cluster.metadata()["topics"]["_schemas"][0]
    (follower,) = set(p["replicas"]) - {p["leader"]}
    (outsider,) = set(cluster.brokers) - set(p["replicas"])
    return p["leader"], follower, outsider


def produce(cluster, topic: str, values: list[tuple[int, bytes]]) -> list:
    """Produce each (partition, value) in a batch of its own (a bad record refuses its whole
    batch); each one's delivery error (None when acknowledged)."""
    errors: list = [None] * len(values)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for i, (partition, value) in enumerate(values):
        producer.produce(topic, value, partition=partition,
                         on_delivery=lambda err, msg, i=i: errors.__setitem__(i, err))
        assert producer.flush(30) == 0
    return errors


def read_back(cluster, topic: str, counts: dict[int, int]) -> dict[int, list[bytes]]:
    """The first ``counts[p]`` values of each partition ``p``."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in counts])
    values: dict[int, list[bytes]] = {p: [] for p in counts}
    deadline = time.monotonic() + 15
    try:
        while any(len(values[p]) < n for p, n in counts.items()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return values


def test_validation_on_the_follower_and_the_broker_without_a_copy_right_after_registering(registry_cluster):
    cluster = registry_cluster
    primary = SchemaRegistryClient({"url": cluster.registry_urls[1]})
    primary.register_schema("warm-up", record("W", "w"))          # _schemas exists (and has its replicas)
    leader, follower, outsider = schemas_roles(cluster)
    primary = SchemaRegistryClient({"url": cluster.registry_urls[leader]})
    topic = f"validated-{uuid.uuid4().hex[:8]}"
    # partition 0 led by the broker without a copy of _schemas-0, partition 1 by its follower
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replica_assignment=[[outsider], [follower]],
                                  config={"confluent.value.schema.validation": "true"})])[topic].result(15)
    unknown = b"\x00" + struct.pack(">I", 987654) + b"\x02"
    context = SerializationContext(topic, MessageField.VALUE)
    written = {0: [], 1: []}

    def produce_checked(serializers) -> None:
        """A good record per serializer to each partition, and one naming an unknown id."""
        good = [(p, serialize({"f0": f"{p}-{len(written[p]) + k}"}, context))
                for p in (0, 1) for k, serialize in enumerate(serializers)]
        errors = produce(cluster, topic, good + [(0, unknown), (1, unknown)])
        assert [e and e.name() for e in errors] == [None] * len(good) + ["INVALID_RECORD"] * 2
        for p, value in good:
            written[p].append(value)
        assert read_back(cluster, topic, {p: len(v) for p, v in written.items()}) == written

    def register(version: int) -> AvroSerializer:
        schema = record("Order", *(f"f{i}" for i in range(version)))
        primary.register_schema(f"{topic}-value", schema)
        return AvroSerializer(primary, schema.schema_str, conf={"auto.register.schemas": False})

    v1 = register(1)
    produce_checked([v1])                 # right after the registration
    # a restart of the broker without a copy: it mirrors _schemas-0 from its start again
    cluster.stop(outsider)
    cluster.start_broker(outsider)
    cluster.wait_until_ready()
    produce_checked([v1, register(2)])
    assert AvroDeserializer(primary)(written[0][-1], context) == {"f0": "0-2", "f1": ""}
