"""Topic administration in a cluster: what one broker is asked, every broker applies."""
from __future__ import annotations

import json
import os
import time

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.protocol.admin import DescribeConfigsRequest
from kazoo.client import KazooClient

from kwire.testing.cluster import send_request
from tests.support.counting import create_topic, produce_counted, wait_for

TOPIC_RESOURCE = 2


def described(address: str, topic: str, key: str) -> str | None:
    """``key`` of ``topic`` as the broker at ``address`` describes it (DescribeConfigs v1)."""
    R = DescribeConfigsRequest[1]
    request = R(resources=[R.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=topic,
                                                     configuration_keys=[key])], include_synonyms=False)
    result = send_request(address, request).to_dict()["results"][0]
    assert result["error_code"] == 0, result
    return next((c["value"] for c in result["configs"] if c["name"] == key), None)


def zookeeper_config(cluster, topic: str) -> dict:
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        return json.loads(zk.get(f"/config/topics/{topic}")[0])["config"]
    finally:
        zk.stop()


def config_change_notices(cluster) -> list[dict]:
    """The /config/changes notifications, oldest first."""
    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(timeout=10)
    try:
        return [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]
    finally:
        zk.stop()


def everywhere(cluster, topic: str, key: str) -> set:
    return {described(b.bootstrap, topic, key) for b in cluster.brokers.values() if b.alive()}


def test_altered_topic_configs_reach_every_broker_and_survive_a_restart(cluster):
    create_topic(cluster.bootstrap, "tuned", partitions=2, rf=3)
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "tuned", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert zookeeper_config(cluster, "tuned") == {"retention.ms": "123456", "cleanup.policy": "compact"}
    # as Kafka's tools expect: a change notification names the topic
    assert {"version": 2, "entity_path": "topics/tuned"} in config_change_notices(cluster)
    wait_for(lambda: everywhere(cluster, "tuned", "retention.ms") == {"123456"}, 10,
             "the new retention.ms on every broker")
    create_topic(cluster.bootstrap, "another", partitions=1, rf=3)    # every broker reconciles again
    assert everywhere(cluster, "tuned", "retention.ms") == {"123456"}
    assert everywhere(cluster, "tuned", "cleanup.policy") == {"compact"}

    delete = ConfigResource(ConfigResource.Type.TOPIC, "tuned", incremental_configs=[
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([delete])[delete].result(30)
    assert zookeeper_config(cluster, "tuned") == {"retention.ms": "123456"}
    wait_for(lambda: everywhere(cluster, "tuned", "cleanup.policy") == {"delete"}, 10,
             "cleanup.policy back to its default on every broker")

    cluster.stop(3)
    cluster.start_broker(3)
    assert described(cluster.broker(3).bootstrap, "tuned", "retention.ms") == "123456"


def test_invalid_topic_configs_are_refused_and_change_nothing(cluster):
    create_topic(cluster.bootstrap, "strict-config", partitions=1, rf=3, retention_ms=1000)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "strict-config", incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
        raise AssertionError("an invalid value was accepted")
    except Exception as exc:
        assert "retention.ms" in str(exc) or "INVALID_CONFIG" in str(exc), exc
    assert zookeeper_config(cluster, "strict-config") == {"retention.ms": "1000"}
    assert everywhere(cluster, "strict-config", "retention.ms") == {"1000"}


def test_deleted_records_stay_deleted_after_the_leader_changes(cluster):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    create_topic(cluster.bootstrap, "trimmed", partitions=1, rf=3)
    acked = produce_counted("confluent", cluster.bootstrap, "trimmed", 100, partitions=1)
    assert len(acked[0]) == 100
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    result = admin.delete_records([TopicPartition("trimmed", 0, 60)])
    assert list(result.values())[0].result(30).low_watermark == 60    # the new low watermark
    leader = cluster.metadata()["topics"]["trimmed"][0]["leader"]
    followers = [b for b in cluster.brokers if b != leader]
    # answered once every live replica's log start moved (Kafka's low watermark)
    assert {b: min_log_offset(cluster, b, "trimmed") for b in followers} == {b: 60 for b in followers}
    cluster.stop(leader)                                # a follower leads now
    consumer = Consumer({"bootstrap.servers": cluster.live_bootstrap(), "group.id": "trim-reader",
                         "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(TopicPartition("trimmed", 0), timeout=10)
    assert (low, high) == (60, 100)
    consumer.assign([TopicPartition("trimmed", 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 40 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(int(msg.value()))
    consumer.close()
    assert values == list(range(60, 100))


def min_log_offset(cluster, broker: int, topic: str) -> int | None:
    """The log start offset broker ``broker`` has checkpointed for ``topic``-0 (None: none yet)."""
    from kwire.log import checkpoints
    path = os.path.join(cluster.broker(broker).data_dir, "logs", f"{topic}-0")
    return checkpoints.read_log_start_offset(path)
