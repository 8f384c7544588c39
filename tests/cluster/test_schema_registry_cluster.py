"""The Schema Registry on a 3-broker cluster: every broker serves it; writes through any broker
land on the primary (the leader of _schemas-0), ids stay unique and survive restarts."""
from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from kwire.testing.cluster import ClusterProcess
from tests.cluster.conftest import require_zookeeper
from tests.support.broker import free_port, wait_port


@pytest.fixture
def registry_cluster():
    require_zookeeper()
    cluster = ClusterProcess(3)
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
