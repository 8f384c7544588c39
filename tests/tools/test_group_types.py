"""``kwire groups`` for share groups (KIP-932) and KIP-848 consumer groups, driven by
confluent-kafka's ShareConsumer and its consumer with ``group.protocol=consumer``."""
from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

import kwire.testing

pytestmark = [pytest.mark.clients, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker():
    with kwire.testing.broker(properties={"group.consumer.min.heartbeat.interval.ms": 500,
                                          "group.consumer.heartbeat.interval.ms": 500}) as b:
        yield b


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def setup_topic(broker, topic: str, partitions: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(records):
        producer.produce(topic, b"r%d" % i, partition=0)
    producer.flush(10)


def earliest(broker, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(10)


def test_a_share_group_shows_its_start_offset_and_lag(broker, groups):
    topic, group = name("share-lag"), name("share-group")
    setup_topic(broker, topic, 2, 50)
    earliest(broker, group)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
    consumer.subscribe([topic])
    accepted, deadline = 0, time.monotonic() + 30
    while accepted < 30 and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if accepted < 30 and not message.error():
                consumer.acknowledge(message)
                accepted += 1
        consumer.commit_sync()
    assert accepted == 30

    code, out, _ = groups("list", "--output", "json")
    assert code == 0 and {"group": group, "type": "share", "state": "Stable", "protocol_type": "share"} \
        in json.loads(out)
    code, out, _ = groups("describe", "--group", group, "--output", "json")
    assert code == 0
    [described] = json.loads(out)
    by_partition = {p["partition"]: p for p in described["partitions"]}
    # partition 0: the 30 accepted are delivery-complete, 20 are not; partition 1 is empty
    assert by_partition[0]["start_offset"] == 30 and by_partition[0]["lag"] == 20
    assert by_partition[1]["lag"] == 0
    code, out, _ = groups("describe", "--group", group)
    assert out.split("\n")[0].split() == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    consumer.close()


def test_a_kip848_consumer_group_shows_members_offsets_and_lag(broker, groups):
    topic, group = name("cg-lag"), name("cg")
    setup_topic(broker, topic, 2, 20)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.id": "cg-tool"})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 30
    while read < 12 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            read += 1
            if read == 12:
                consumer.commit(message=message, asynchronous=False)
    assert read == 12

    code, out, _ = groups("list", "--output", "json")
    assert {"group": group, "type": "consumer", "state": "Stable", "protocol_type": "consumer"} in json.loads(out)
    code, out, _ = groups("describe", "--group", group, "--output", "json")
    assert code == 0
    [described] = json.loads(out)
    by_partition = {p["partition"]: p for p in described["partitions"]}
    assert by_partition[0]["current_offset"] == 12 and by_partition[0]["log_end_offset"] == 20
    assert by_partition[0]["lag"] == 8 and by_partition[0]["client_id"] == "cg-tool"
    code, out, _ = groups("describe", "--group", group, "--members", "--output", "json")
    [members] = json.loads(out)
    assert [m["partitions"] for m in members["members"]] == [2]
    # an active KIP-848 group is not reset (DescribeGroups alone would call it Dead)
    code, _, err = groups("reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    assert code != 0 and "inactive" in err, err
    consumer.close()


def first_offset(broker, group: str, topic: str) -> int:
    """The first offset a new ShareConsumer of ``group`` is given (records released on close)."""
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            offsets = [m.offset() for m in consumer.poll(0.5) or [] if not m.error() and m.topic() == topic]
            if offsets:
                return min(offsets)
        raise AssertionError("the share consumer was given no records")
    finally:
        consumer.close()


def start_offsets(groups, group: str) -> dict[int, int | None]:
    code, out, err = groups("describe", "--group", group, "--output", "json")
    assert code == 0, err
    return {p["partition"]: p["start_offset"] for p in json.loads(out)[0]["partitions"]}


def test_a_share_groups_start_offsets_are_reset_and_deleted_only_while_it_is_empty(broker, groups):
    topic, group = name("share-reset"), name("share-group")
    setup_topic(broker, topic, 1, 20)
    earliest(broker, group)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", "max.poll.records": 5})
    consumer.subscribe([topic])
    accepted, deadline = 0, time.monotonic() + 30
    while accepted < 10 and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if accepted < 10 and not message.error():
                consumer.acknowledge(message)
                accepted += 1
        consumer.commit_sync()
    assert accepted == 10 and start_offsets(groups, group) == {0: 10}

    # Kafka's refusal while the group has a member (kafka-share-groups.sh)
    code, _, err = groups("reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert code == 1 and f"Share group '{group}' is not empty." in err, err
    code, _, err = groups("delete-offsets", "--group", group, "--topic", topic)
    assert code == 1 and f"Share group '{group}' is not empty." in err, err
    consumer.close()

    code, out, err = groups("reset-offsets", "--group", group, "--all-topics", "--to-offset", "5", "--dry-run",
                            "--output", "json")
    assert code == 0, err
    [planned] = json.loads(out)["groups"]
    assert planned["offsets"] == [{"topic": topic, "partition": 0, "current_offset": 10, "new_offset": 5}]
    assert start_offsets(groups, group) == {0: 10}                  # a dry run changes nothing
    code, out, err = groups("reset-offsets", "--group", group, "--topic", topic, "--to-offset", "5", "--execute")
    assert code == 0 and out.split("\n")[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], err
    assert start_offsets(groups, group) == {0: 5}
    assert first_offset(broker, group, topic) == 5

    code, _, err = groups("reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute")
    assert code == 0 and start_offsets(groups, group) == {0: 20}, err
    code, _, err = groups("reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert code == 0 and start_offsets(groups, group) == {0: 0}, err
    assert first_offset(broker, group, topic) == 0

    code, out, err = groups("delete-offsets", "--group", group, "--topic", topic)
    assert code == 0 and f"Request succeeded for deleting offsets from share group {group}." in out, err
    assert out.split("\n")[1].split() == ["TOPIC", "STATUS"] and "Successful" in out
    assert all(start is None for start in start_offsets(groups, group).values())   # no state left
