"""Dynamic broker configs on three brokers: the cluster default written through one broker is
in force on all of them, a broker's own value wins on that broker, both are kept in Kafka's
/config/brokers znodes (with a /config/changes notice) and survive a restart, while a stock
producer keeps writing and every acknowledged record is read back."""
from __future__ import annotations

import json
import os
import re

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ResourceType)
from kafka.protocol.admin import IncrementalAlterConfigsRequest
from kazoo.client import KazooClient

from kwire.cluster.fetcher import fetcher_id
from kwire.testing.cluster import send_request
from tests.support.counting import (join_producer, produce_in_background, read_all, tally, wait_acknowledged,
                                    wait_for, wait_full_isrs)

TIMEOUT = 20
BIG = os.urandom(3000)           # incompressible: over a 2000-byte message.max.bytes


def set_default(address: str, name: str, value: str) -> None:
    """The cluster default (resource name ""), which librdkafka's admin does not accept: the
    request Kafka's Java admin and kafka-configs --entity-default send."""
    R = IncrementalAlterConfigsRequest[1]
    request = R(validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[
            R.AlterConfigsResource.AlterableConfig(name=name, config_operation=0, value=value)])])
    [result] = send_request(address, request, TIMEOUT).responses
    assert result.error_code == 0, result


def big_record_error(bootstrap: str, topic: str, partition: int):
    """The delivery error of one 3000-byte record to ``partition`` (None: acknowledged)."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000})
    p.produce(topic, BIG, partition=partition, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(TIMEOUT) == 0
    return errors[0]


def broker_entry(bootstrap: str, broker_id: int, name: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, str(broker_id))
    return admin.describe_configs([res])[res].result(TIMEOUT)[name]


def test_a_default_and_a_per_broker_value_reach_every_broker_live_and_after_a_restart(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # partition p is led by broker p + 1; "sized" carries the counted load, "big" the probes
    assignment = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    for future in admin.create_topics([NewTopic(t, num_partitions=3, replica_assignment=assignment) for t in ("sized", "big")]).values():
        future.result(30)
    wait_full_isrs(cluster.zookeeper.connect, "sized")
    thread, acked = produce_in_background("confluent", cluster.bootstrap, "sized", 6000, pause_every=200)
    wait_acknowledged(thread, acked, 500)
    assert big_record_error(cluster.bootstrap, "big", 2) is None

    set_default(cluster.broker(1).bootstrap, "message.max.bytes", "2000")
    for p in range(3):      # every leader, not only the broker that took the alter
        err = wait_for(lambda: (e := big_record_error(cluster.bootstrap, "big", p)) and e, 20,
                       f"the default in force on the leader of partition {p}")
        assert err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    entry = broker_entry(cluster.bootstrap, 3, "message.max.bytes")
    assert (entry.value, entry.source) == ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    res = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
        ConfigEntry("message.max.bytes", "10000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    assert big_record_error(cluster.bootstrap, "big", 2) is None           # broker 3's own value
    assert big_record_error(cluster.bootstrap, "big", 1).code() == KafkaError.MSG_SIZE_TOO_LARGE

    zk = KazooClient(cluster.zookeeper.connect)
    zk.start(10)
    try:
        assert json.loads(zk.get("/config/brokers/<default>")[0]) == {
            "version": 1, "config": {"message.max.bytes": "2000"}}
        assert json.loads(zk.get("/config/brokers/3")[0])["config"] == {"message.max.bytes": "10000"}
        notices = [json.loads(zk.get(f"/config/changes/{n}")[0]) for n in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notices
        assert {"version": 2, "entity_path": "brokers/3"} in notices
    finally:
        zk.stop()

    cluster.stop(3)
    cluster.start_broker(3)
    wait_full_isrs(cluster.zookeeper.connect, "sized")
    entry = wait_for(lambda: (e := broker_entry(cluster.bootstrap, 3, "message.max.bytes")).value == "10000" and e,
                     20, "broker 3's own value after its restart")
    assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    join_producer(thread)
    counts = tally(acked, read_all(cluster.bootstrap, "sized", 3, sum(map(len, acked.values()))))
    assert counts["acknowledged"] == 6000 and counts["lost"] == 0 and counts["duplicates"] == 0, counts


def test_num_replica_fetchers_raised_on_the_running_cluster_spreads_partitions_over_fetchers(cluster_factory):
    """Each fetcher has its own connection and Kafka's client id (broker-<id>-fetcher-<n>), so the
    leader's request log shows which run; acks=all writes keep working across the change."""
    cluster = cluster_factory(3, properties={"log.request.debug": "true"})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("spread", num_partitions=12, replica_assignment=[[1, 2, 3]] * 12)])["spread"].result(30)
    wait_full_isrs(cluster.zookeeper.connect, "spread")
    fetchers_of_2 = lambda: set(re.findall(r"client_id='broker-2-fetcher-(\d+)'", cluster.broker(1).log_text()))
    assert fetchers_of_2() == {"0"}
    thread, acked = produce_in_background("confluent", cluster.bootstrap, "spread", 4000, partitions=12,
                                          pause_every=200)
    wait_acknowledged(thread, acked, 300)
    set_default(cluster.broker(3).bootstrap, "num.replica.fetchers", "3")
    expected = {str(fetcher_id(("spread", p), 3)) for p in range(12)}
    assert len(expected) == 3
    wait_for(lambda: fetchers_of_2() == expected, 20, f"broker 2 fetching with fetchers {expected}")
    join_producer(thread)
    wait_full_isrs(cluster.zookeeper.connect, "spread")
    counts = tally(acked, read_all(cluster.bootstrap, "spread", 12, 4000))
    assert counts["acknowledged"] == 4000 and counts["lost"] == 0 and counts["duplicates"] == 0, counts
