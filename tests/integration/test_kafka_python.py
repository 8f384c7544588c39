"""kafka-python (3.x) against a kwire process: produce, consume, rewind, lookups, admin."""
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import (InvalidPartitionsError, InvalidReplicationFactorError, InvalidTopicError,
                          TopicAlreadyExistsError, UnknownTopicOrPartitionError)


def topic_name(prefix="kp"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def consume_all(bootstrap, topic, partitions=(0,), expect=None, timeout=15, **kw):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=1000, **kw)
    tps = [TopicPartition(topic, p) for p in partitions]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (expect is None or len(out) < expect):
        for batch in consumer.poll(timeout_ms=500).values():
            out.extend(batch)
        if expect is None and not out:
            continue
        if expect is None:
            break
    consumer.close()
    return out


@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_round_trip(broker, compression):
    topic = topic_name()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=compression, acks="all")
    sent = []
    for i in range(200):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 and key else (f"v{i}" * (i % 5 + 1)).encode()
        headers = [("h", str(i).encode()), ("empty", b"")]
        md = producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=1_600_000_000_000 + i)
        sent.append((key, value, headers, md))
    producer.flush()
    offsets = [md.get(timeout=10).offset for *_, md in sent]
    assert offsets == list(range(200)), "offsets are contiguous from 0 in send order"
    producer.close()
    got = consume_all(broker.bootstrap, topic, expect=200)
    assert [m.offset for m in got] == list(range(200))
    for (key, value, headers, _), m in zip(sent, got):
        assert (m.key, m.value, list(m.headers), m.timestamp) == (key, value, headers, 1_600_000_000_000 + m.offset)


def test_binary_and_one_mib_values(broker):
    topic = topic_name()
    big = bytes(range(256)) * 4096  # 1 MiB, every byte value
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": str(2 * 1024 * 1024)})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=2 * 1024 * 1024)
    producer.send(topic, value=big).get(timeout=10)
    producer.send(topic, value=b"\x00\xff" * 10).get(timeout=10)
    producer.close()
    got = consume_all(broker.bootstrap, topic, expect=2, max_partition_fetch_bytes=2 * 1024 * 1024)
    assert [m.value for m in got] == [big, b"\x00\xff" * 10]


def test_seek_rewind_and_offset_lookups(broker):
    topic = topic_name()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    base = 1_700_000_000_000
    for i in range(50):
        producer.send(topic, value=str(i).encode(), timestamp_ms=base + i * 1000).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 50}
    found = consumer.offsets_for_times({tp: base + 10_500})[tp]
    assert (found.offset, found.timestamp) == (11, base + 11_000)
    assert consumer.offsets_for_times({tp: base + 10**9})[tp] is None
    consumer.seek(tp, 37)
    first = next(iter(consumer))
    assert (first.offset, first.value) == (37, b"37")
    consumer.seek(tp, 3)  # rewind
    assert next(iter(consumer)).offset == 3
    consumer.close()


def test_acks_zero_and_one(broker):
    topic = topic_name()
    for acks in (0, 1):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, enable_idempotence=False)
        for i in range(20):
            producer.send(topic, value=f"{acks}-{i}".encode())
        producer.flush()
        producer.close()
    got = consume_all(broker.bootstrap, topic, expect=40)
    assert sorted(m.value for m in got) == sorted([f"{a}-{i}".encode() for a in (0, 1) for i in range(20)])


def test_admin_create_describe_alter_delete(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    name = topic_name("adm")
    admin.create_topics([NewTopic(name, 3, 1, topic_configs={"retention.ms": "3600000"})])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(name, 3, 1)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics([NewTopic(topic_name(), 0, 1)])
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics([NewTopic(topic_name(), 1, 3)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("bad name!", 1, 1)])
    res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
    configs = res["topic"][name]
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["max.message.bytes"]["value"] == "1048588"
    assert configs["max.message.bytes"]["config_source"] == "DEFAULT_CONFIG"
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={"retention.ms": "7200000"})])
    res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    assert res["topic"][name]["retention.ms"]["value"] == "7200000"
    admin.create_partitions({name: NewPartitions(5)})
    md = admin.describe_topics([name])
    assert len(md[0]["partitions"]) == 5
    admin.delete_topics([name])
    assert name not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([name])
    admin.close()
