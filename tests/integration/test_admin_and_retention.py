"""Admin APIs, live per-topic overrides, retention and timestamps, driven by stock clients."""
import os
import time
import uuid

import pytest
from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer,
                             KafkaError, KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, OffsetSpec, ResourceType)
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

TIMEOUT = 15


def topic_name(prefix="adm"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def admin_for(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin, name, partitions=1, **configs):
    admin.create_topics([NewTopic(name, partitions, 1, config={k: str(v) for k, v in configs.items()})],
                        operation_timeout=10)[name].result(TIMEOUT)


def topic_configs(admin, name):
    res = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([res])[res].result(TIMEOUT)


def incremental(admin, name, *entries):
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
    return admin.incremental_alter_configs([res])[res].result(TIMEOUT)


def produce(bootstrap, topic, values, partition=0, timestamp=0, **conf):
    """Send ``values``; returns [(err, offset, timestamp)] in delivery order."""
    reports = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 10000, **conf})
    for v in values:
        producer.produce(topic, value=v, partition=partition, timestamp=timestamp,
                         on_delivery=lambda err, msg: reports.append((err, msg.offset(), msg.timestamp())))
    assert producer.flush(TIMEOUT) == 0, "undelivered messages"
    return reports


def watermarks(bootstrap, topic, partition=0):
    """(low, high) from ListOffsets earliest/latest, via the admin API."""
    admin = admin_for(bootstrap)
    tp = TopicPartition(topic, partition)
    low = admin.list_offsets({tp: OffsetSpec.earliest()}, request_timeout=10)[tp].result(TIMEOUT).offset
    high = admin.list_offsets({tp: OffsetSpec.latest()}, request_timeout=10)[tp].result(TIMEOUT).offset
    return low, high


def poll_one(consumer, timeout=10):
    """First message or error event within ``timeout`` seconds (None if nothing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None:
            return msg
    return None


def consumer_at(bootstrap, topic, offset, partition=0, **conf):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, **conf})
    c.assign([TopicPartition(topic, partition, offset)])
    return c


def kafka_error_of(excinfo):
    return excinfo.value.args[0]


# -- configs --------------------------------------------------------------------------------

def test_incremental_alter_configs_set_delete_append_and_describe(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    create(admin, name, **{"retention.ms": 3600000})
    before = topic_configs(admin, name)
    assert before["retention.ms"].value == "3600000"
    assert before["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert before["cleanup.policy"].value == "delete"
    assert before["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value

    incremental(admin, name,
                ConfigEntry("retention.bytes", "123456", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
                ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    after = topic_configs(admin, name)
    assert after["retention.bytes"].value == "123456"
    assert after["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert after["retention.ms"].value == str(7 * 24 * 3600 * 1000), "DELETE falls back to the broker default"
    assert after["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert sorted(after["cleanup.policy"].value.split(",")) == ["compact", "delete"]
    assert after["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # APPEND of a value already present changes nothing
    incremental(admin, name, ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND))
    assert sorted(topic_configs(admin, name)["cleanup.policy"].value.split(",")) == ["compact", "delete"]


@pytest.mark.parametrize("key,value", [("retention.ms", "abc"), ("no.such.config", "1"),
                                       ("cleanup.policy", "shred")])
def test_invalid_config_is_refused_and_nothing_changes(broker, key, value):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    create(admin, name, **{"retention.ms": 3600000})
    with pytest.raises(KafkaException) as err:
        incremental(admin, name, ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
    assert kafka_error_of(err).code() == KafkaError.INVALID_CONFIG
    assert topic_configs(admin, name)["retention.ms"].value == "3600000"
    # CreateTopics validates the same way
    other = topic_name()
    with pytest.raises(KafkaException) as err:
        create(admin, other, **{key: value})
    assert kafka_error_of(err).code() == KafkaError.INVALID_CONFIG
    assert other not in admin.list_topics(timeout=10).topics


def test_create_topics_validate_only_creates_nothing(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    admin.create_topics([NewTopic(name, 3, 1)], validate_only=True)[name].result(TIMEOUT)
    assert name not in admin.list_topics(timeout=10).topics
    # a real create afterwards works (validate_only reserved nothing)
    create(admin, name, partitions=3)
    assert len(admin.list_topics(name, timeout=10).topics[name].partitions) == 3


def test_describe_cluster(broker):
    admin = admin_for(broker.bootstrap)
    desc = admin.describe_cluster(request_timeout=10).result(TIMEOUT)
    assert len(desc.nodes) == 1
    node = desc.nodes[0]
    assert node.port == broker.port and node.host == "127.0.0.1"
    assert desc.controller is not None and desc.controller.id == node.id
    assert desc.cluster_id and isinstance(desc.cluster_id, str)
    assert admin.list_topics(timeout=10).cluster_id == desc.cluster_id


def test_describe_broker_config(broker):
    admin = admin_for(broker.bootstrap)
    res = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([res])[res].result(TIMEOUT)
    mmb = configs["message.max.bytes"]
    assert mmb.value == "1048588"
    assert not mmb.is_read_only                      # a dynamic broker config
    assert configs["log.dirs"].is_read_only
    assert mmb.source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["num.partitions"].value == "1"
    # the broker's own overrides are reported as static broker config
    assert configs["group.initial.rebalance.delay.ms"].value == "0"
    assert configs["group.initial.rebalance.delay.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_topic_max_message_bytes_applied_live(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    create(admin, name, **{"max.message.bytes": 1000})
    big = os.urandom(5000)  # incompressible, one record in one batch
    [(err, _, _)] = produce(broker.bootstrap, name, [big], **{"message.timeout.ms": 5000})
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
    incremental(admin, name, ConfigEntry("max.message.bytes", "100000",
                                         incremental_operation=AlterConfigOpType.SET))
    [(err, offset, _)] = produce(broker.bootstrap, name, [big])
    assert err is None and offset == 0
    c = consumer_at(broker.bootstrap, name, OFFSET_BEGINNING)
    msg = poll_one(c)
    c.close()
    assert msg is not None and msg.error() is None and msg.value() == big


# -- DeleteRecords ----------------------------------------------------------------------------

def test_delete_records_moves_low_watermark(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    create(admin, name)
    produce(broker.bootstrap, name, [f"r{i}".encode() for i in range(100)])
    assert watermarks(broker.bootstrap, name) == (0, 100)
    tp = TopicPartition(name, 0, 40)
    deleted = admin.delete_records([tp], request_timeout=10)[tp].result(TIMEOUT)
    assert deleted.low_watermark == 40
    assert watermarks(broker.bootstrap, name) == (40, 100)

    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    assert probe.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (40, 100)
    probe.close()

    # below the low watermark with auto.offset.reset=error: the consumer reports an error
    c = consumer_at(broker.bootstrap, name, 10, **{"auto.offset.reset": "error"})
    msg = poll_one(c)
    c.close()
    assert msg is not None and msg.error() is not None, "expected an offset-reset error event"
    assert msg.error().code() == KafkaError._AUTO_OFFSET_RESET
    assert "OFFSET_OUT_OF_RANGE" in msg.error().str() or "out of range" in msg.error().str().lower()

    # with auto.offset.reset=earliest it resumes at the new start
    c = consumer_at(broker.bootstrap, name, 10, **{"auto.offset.reset": "earliest"})
    msg = poll_one(c)
    c.close()
    assert msg is not None and msg.error() is None
    assert (msg.offset(), msg.value()) == (40, b"r40")

    # beyond the high watermark is refused
    tp = TopicPartition(name, 0, 1000)
    with pytest.raises(KafkaException) as err:
        admin.delete_records([tp], request_timeout=10)[tp].result(TIMEOUT)
    assert kafka_error_of(err).code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert watermarks(broker.bootstrap, name) == (40, 100)


# -- retention ------------------------------------------------------------------------------

def segment_files(b, topic, partition=0):
    d = os.path.join(b.data_dir, "logs", f"{topic}-{partition}")
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def wait_for(predicate, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


@pytest.mark.parametrize("mode", ["bytes", "time"])
def test_retention_deletes_old_segments(fresh_broker, mode):
    b = fresh_broker(**{"log.retention.check.interval.ms": "300", "log.segment.bytes": "2000"})
    admin = admin_for(b.bootstrap)
    name = topic_name("ret")
    n = 200
    values = [f"{i:04d}".encode() + b"." * 96 for i in range(n)]
    if mode == "bytes":
        create(admin, name, **{"retention.bytes": 5000})
        old, new, ts = values, [], 0
    else:
        create(admin, name, **{"retention.ms": 3600000})
        ts = int(time.time() * 1000) - 24 * 3600 * 1000
        old, new = values[:150], values[150:]
    # one record per batch: ~170-byte batches, so a 2000-byte segment rolls every ~11 records
    conf = {"linger.ms": 0, "batch.num.messages": 1}
    reports = produce(b.bootstrap, name, old, timestamp=ts, **conf)
    if new:
        reports += produce(b.bootstrap, name, new, **conf)  # current time: must survive
    assert [o for _, o, _ in reports] == list(range(n))
    wait_for(lambda: watermarks(b.bootstrap, name)[0] > 0, timeout=8, step=0.3)
    low, high = watermarks(b.bootstrap, name)
    assert low > 0, f"retention did not move the log start offset:\n{b.log_text()[-3000:]}"
    assert high == n
    remaining = segment_files(b, name)
    if mode == "bytes":
        size = sum(os.path.getsize(os.path.join(b.data_dir, "logs", f"{name}-0", f)) for f in remaining)
        assert size <= 5000 + 2000, f"partition still holds {size} bytes"
    else:
        assert low <= 150, "segments with current timestamps must not be deleted"
        assert low >= 100, f"most old-timestamp segments should be gone, low watermark {low}"
    assert int(remaining[0][:-4]) == low, "the first remaining segment starts at the low watermark"
    # the newest records are still readable, and reading below the start resets to it
    c = consumer_at(b.bootstrap, name, OFFSET_BEGINNING)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < n - low and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value()))
    c.close()
    assert got == [(i, values[i]) for i in range(low, n)]


def test_segment_count_drops_after_retention(fresh_broker):
    b = fresh_broker(**{"log.retention.check.interval.ms": "300", "log.segment.bytes": "2000"})
    admin = admin_for(b.bootstrap)
    name = topic_name("ret")
    # retention off at first: produce, count segments, then turn retention on live
    create(admin, name, **{"retention.ms": -1})
    old_ts = int(time.time() * 1000) - 24 * 3600 * 1000
    produce(b.bootstrap, name, [b"x" * 100 for _ in range(150)], timestamp=old_ts,
            **{"linger.ms": 0, "batch.num.messages": 1})
    time.sleep(0.8)  # two retention passes with retention.ms=-1 delete nothing
    before = segment_files(b, name)
    assert len(before) >= 5, before
    assert watermarks(b.bootstrap, name) == (0, 150)
    incremental(admin, name, ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET))
    after = wait_for(lambda: len(segment_files(b, name)) == 1 and segment_files(b, name), timeout=5)
    assert after and len(after) == 1, f"segments left: {segment_files(b, name)}"
    low, high = watermarks(b.bootstrap, name)
    assert high == 150 and 0 < low == int(after[0][:-4])


# -- timestamps -----------------------------------------------------------------------------

def test_log_append_time_topic(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    create(admin, name, **{"message.timestamp.type": "LogAppendTime"})
    old = 1_500_000_000_000
    before = int(time.time() * 1000)
    [(err, offset, (ts_type, ts))] = produce(broker.bootstrap, name, [b"stamped"], timestamp=old)
    after = int(time.time() * 1000)
    assert err is None and offset == 0
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= ts <= after + 1000, \
        "the produce response carries the broker's append time"
    c = consumer_at(broker.bootstrap, name, OFFSET_BEGINNING)
    msg = poll_one(c)
    c.close()
    assert msg is not None and msg.error() is None and msg.value() == b"stamped"
    ts_type, ts = msg.timestamp()
    assert ts_type == TIMESTAMP_LOG_APPEND_TIME
    assert abs(ts - time.time() * 1000) < 5000, f"timestamp {ts} is not the append time"
    # kafka-python checks the batch CRC (which must be recomputed after stamping the append time)
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                       check_crcs=True)
    ktp = KpTopicPartition(name, 0)
    kc.assign([ktp])
    kc.seek(ktp, 0)
    records = []
    deadline = time.monotonic() + 10
    while not records and time.monotonic() < deadline:
        for batch in kc.poll(timeout_ms=200).values():
            records.extend(batch)
    kc.close()
    assert [(r.value, r.timestamp_type, r.timestamp) for r in records] == [(b"stamped", 1, ts)]
    # ... while a CreateTime topic keeps the producer's timestamp
    plain = topic_name()
    create(admin, plain)
    produce(broker.bootstrap, plain, [b"kept"], timestamp=old)
    c = consumer_at(broker.bootstrap, plain, OFFSET_BEGINNING)
    msg = poll_one(c)
    c.close()
    assert msg is not None and msg.timestamp() == (TIMESTAMP_CREATE_TIME, old)


# -- topic lifecycle ------------------------------------------------------------------------

def test_delete_then_recreate_is_empty(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name()
    create(admin, name)
    produce(broker.bootstrap, name, [b"old-%d" % i for i in range(30)])
    assert watermarks(broker.bootstrap, name) == (0, 30)
    admin.delete_topics([name], operation_timeout=10)[name].result(TIMEOUT)
    assert wait_for(lambda: name not in admin.list_topics(timeout=10).topics, timeout=5)
    create(admin, name)
    assert watermarks(broker.bootstrap, name) == (0, 0)
    [(err, offset, _)] = produce(broker.bootstrap, name, [b"new"])
    assert err is None and offset == 0
    c = consumer_at(broker.bootstrap, name, OFFSET_BEGINNING)
    msg = poll_one(c)
    c.close()
    assert msg is not None and msg.error() is None and (msg.offset(), msg.value()) == (0, b"new")


def test_consumer_does_not_auto_create_unless_allowed(broker):
    admin = admin_for(broker.bootstrap)
    name = topic_name("noauto")
    c = consumer_at(broker.bootstrap, name, OFFSET_BEGINNING, **{"allow.auto.create.topics": False,
                                                                  "topic.metadata.refresh.interval.ms": 500})
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        c.poll(0.2)
    c.close()
    assert name not in admin.list_topics(timeout=10).topics
    # control: the same consumer with auto-creation allowed does create the topic
    c = consumer_at(broker.bootstrap, name, OFFSET_BEGINNING, **{"allow.auto.create.topics": True,
                                                                  "topic.metadata.refresh.interval.ms": 500})
    created = wait_for(lambda: (c.poll(0.2), name in admin.list_topics(timeout=10).topics)[1], timeout=5)
    c.close()
    assert created, "allow.auto.create.topics=true should create the topic"


def test_kafka_python_admin_at_the_newest_versions(broker):
    """kafka-python 3.0 sends DescribeCluster v2 (include_fenced_brokers), ListOffsets v11 and, given
    a pattern, ListTransactions v2 (KIP-1152: the whole id must match)."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    producers = []
    try:
        described = admin.describe_cluster()
        assert [(b["port"], b["is_fenced"]) for b in described["brokers"]] == [(broker.port, False)]
        name = topic_name("kp")
        create(admin_for(broker.bootstrap), name)
        produce(broker.bootstrap, name, [b"a", b"b"])
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
        tp = KpTopicPartition(name, 0)
        assert (consumer.beginning_offsets([tp]), consumer.end_offsets([tp])) == ({tp: 0}, {tp: 2})
        consumer.close()
        prefix = uuid.uuid4().hex[:6]
        for suffix in ("a", "b"):
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{prefix}-{suffix}")
            producer.init_transactions()
            producers.append(producer)
        def listed(pattern):      # {broker id: listings}
            return sorted(t.transactional_id for rows in admin.list_transactions(
                transactional_id_pattern=pattern).values() for t in rows)
        assert listed(f"{prefix}-a") == [f"{prefix}-a"]
        assert listed(f"{prefix}-.") == [f"{prefix}-a", f"{prefix}-b"]
        assert listed(prefix) == []
    finally:
        for producer in producers:
            producer.close()
        admin.close()
