"""Dynamic broker configs on one node, through confluent-kafka's and kafka-python's admin
clients: IncrementalAlterConfigs / AlterConfigs on the BROKER resource (this broker's id or
the cluster default ""), applied without a restart, kept across one, reported with Kafka's
sources; keys that cannot change at runtime are refused with Kafka's error."""
from __future__ import annotations

import os
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ResourceType)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

import kwire.testing
from kwire.testing.cluster import send_request

pytestmark = pytest.mark.clients
TIMEOUT = 15
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


def alter(bootstrap, entity: str, *ops: tuple[str, str | None, AlterConfigOpType], validate_only=False):
    """IncrementalAlterConfigs: through confluent-kafka for a broker; for the cluster default,
    whose empty name neither librdkafka nor kafka-python's admin accepts (Kafka's Java admin
    and kafka-configs --entity-default do), as kafka-python's protocol request."""
    if entity == "":
        R = IncrementalAlterConfigsRequest[1]
        request = R(resources=[R.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            R.AlterConfigsResource.AlterableConfig(name=n, config_operation=int(op.value), value=v)
            for n, v, op in ops])], validate_only=validate_only)
        [result] = send_request(bootstrap, request, TIMEOUT).responses
        assert result.error_code == 0, result
        return result
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in ops]
    res = ConfigResource(ResourceType.BROKER, entity, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})       # alive until the answer
    return admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(TIMEOUT)


def describe_default(bootstrap) -> dict:
    """name -> (value, source) of the cluster default resource, as DescribeConfigs answers it."""
    D = DescribeConfigsRequest[4]
    request = D(resources=[D.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None)],
                include_synonyms=True, include_documentation=False)
    [result] = send_request(bootstrap, request, TIMEOUT).results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def describe(bootstrap, entity: str) -> dict:
    res = ConfigResource(ResourceType.BROKER, entity)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_configs([res])[res].result(TIMEOUT)


def send(bootstrap, topic, values) -> list:
    """The delivery errors (None when acknowledged), in order."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 8000})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(TIMEOUT) == 0
    return errors


def create(bootstrap, topic, **configs):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={k: str(v) for k, v in configs.items()})])[topic].result(TIMEOUT)


def test_message_max_bytes_changes_live_per_broker_over_the_default_and_survives_a_restart(tmp_path):
    big = os.urandom(4000)             # incompressible: one 4 KB record
    with kwire.testing.broker(data_dir=str(tmp_path)) as b:
        topic = f"dyn-{uuid.uuid4().hex[:8]}"
        create(b.bootstrap, topic)
        assert send(b.bootstrap, topic, [big]) == [None]
        alter(b.bootstrap, "", ("message.max.bytes", "2000", SET))          # the cluster default
        [err] = send(b.bootstrap, topic, [big])
        assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
        entry = describe(b.bootstrap, "1")["message.max.bytes"]
        assert (entry.value, entry.source, entry.is_read_only) == \
            ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)
        assert describe_default(b.bootstrap) == {
            "message.max.bytes": ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)}
        alter(b.bootstrap, "1", ("message.max.bytes", "10000", SET))        # this broker wins
        assert send(b.bootstrap, topic, [big]) == [None]
        entry = describe(b.bootstrap, "1")["message.max.bytes"]
        assert (entry.value, entry.source) == ("10000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    with kwire.testing.broker(data_dir=str(tmp_path)) as b:                # restarted: still in force
        assert describe(b.bootstrap, "1")["message.max.bytes"].value == "10000"
        alter(b.bootstrap, "1", ("message.max.bytes", None, DELETE))
        [err] = send(b.bootstrap, topic, [big])                               # the default again
        assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE
        alter(b.bootstrap, "", ("message.max.bytes", None, DELETE))
        assert send(b.bootstrap, topic, [big]) == [None]
        entry = describe(b.bootstrap, "1")["message.max.bytes"]
        assert (entry.value, entry.source, entry.is_read_only) == ("1048588", ConfigSource.DEFAULT_CONFIG.value, False)


def test_log_retention_set_on_the_broker_deletes_old_segments_of_every_topic_live(tmp_path):
    with kwire.testing.broker(data_dir=str(tmp_path), properties={
            "log.retention.check.interval.ms": 300, "log.segment.bytes": 2000}) as b:
        topic = f"ret-{uuid.uuid4().hex[:8]}"
        create(b.bootstrap, topic)                       # no override: the broker's 7 days apply
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        day_old = int(time.time() * 1000) - 24 * 3600 * 1000
        for i in range(100):
            p.produce(topic, b"x" * 100, timestamp=day_old)
        assert p.flush(TIMEOUT) == 0
        segments = lambda: sorted(f for f in os.listdir(os.path.join(b.data_dir, f"{topic}-0"))
                                  if f.endswith(".log"))
        time.sleep(0.8)                                  # two retention passes keep everything
        assert len(segments()) >= 4
        alter(b.bootstrap, "1", ("log.retention.hours", "1", SET))
        deadline = time.monotonic() + 10
        while len(segments()) > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(segments()) == 1, segments()
        entry = describe(b.bootstrap, "1")["log.retention.hours"]
        assert (entry.value, entry.source) == ("1", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_keys_that_cannot_change_unknown_keys_and_bad_values_are_refused_and_nothing_changes(tmp_path):
    with kwire.testing.broker(data_dir=str(tmp_path)) as b:
        for ops, code, words in [
                ([("log.dirs", "/elsewhere", SET)], KafkaError.INVALID_REQUEST, "Cannot update these configs dynamically"),
                ([("no.such.key", "1", SET)], KafkaError.INVALID_CONFIG, "no.such.key"),
                ([("message.max.bytes", "lots", SET)], KafkaError.INVALID_CONFIG, "message.max.bytes")]:
            with pytest.raises(KafkaException) as excinfo:
                alter(b.bootstrap, "1", *ops)
            error = excinfo.value.args[0]
            assert error.code() == code and words in error.str(), error
        alter(b.bootstrap, "1", ("message.max.bytes", "5000", SET), validate_only=True)
        entry = describe(b.bootstrap, "1")["message.max.bytes"]
        assert (entry.value, entry.source) == ("1048588", ConfigSource.DEFAULT_CONFIG.value)
        assert describe(b.bootstrap, "1")["log.dirs"].is_read_only
        # AlterConfigs (not incremental) replaces the broker's whole dynamic set; kafka-python
        # reads the dynamic configs first and sends them along, so message.max.bytes stays
        alter(b.bootstrap, "1", ("message.max.bytes", "5000", SET))
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            admin.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "1",
                                                  configs={"min.insync.replicas": "2"})], incremental=False)
        finally:
            admin.close()
        configs = describe(b.bootstrap, "1")
        assert (configs["min.insync.replicas"].value, configs["min.insync.replicas"].source) == \
            ("2", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert (configs["message.max.bytes"].value, configs["message.max.bytes"].source) == \
            ("5000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
