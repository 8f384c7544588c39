"""Broker-side schema validation through the built-in Schema Registry: a topic with
confluent.value.schema.validation takes what confluent-kafka's serializers write under the
topic's subject and refuses, with INVALID_RECORD, records that are not Confluent-framed, name an
id that is not registered or not under the subject, or do not decode; kafka-python and the Java
client show the broker's reason, librdkafka the code.  Nothing of a refused record is stored."""
from __future__ import annotations

import io
import json
import struct
import subprocess
import time
import uuid

import fastavro
import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidRecordError, KafkaError as KafkaPythonError

from tests.support.broker import BrokerProcess, free_port, wait_port
from tests.support.java import java_available, start_java, stop

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(broker, registry client, {name: framed value})."""
    port = free_port()
    broker = BrokerProcess(tmp_path_factory.mktemp("validation"),
                           properties={"schema.registry.listeners": f"http://127.0.0.1:{port}"}).start()
    wait_port("127.0.0.1", port, timeout=30)
    client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    yield broker, client
    broker.close()


def topic_with(broker, client, **configs) -> tuple[str, int, int]:
    """A validated topic; (name, the id of ORDER under its subject, an id under another subject)."""
    name = f"orders-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config={"confluent.value.schema.validation": "true",
                                                      **configs})])[name].result(15)
    order_id = client.register_schema(f"{name}-value", Schema(json.dumps(ORDER), "AVRO"))
    other_id = client.register_schema(f"elsewhere-{name}", Schema(json.dumps(OTHER), "AVRO"))
    return name, order_id, other_id


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def avro_order(i: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), {"id": i, "item": f"pen {i}"})
    return out.getvalue()


def bad_values(order_id: int, other_id: int) -> dict[str, bytes]:
    return {"not-framed": b"plain text, no header",
            "unknown-id": framed(987654, avro_order(1)),
            "other-subject": framed(other_id, struct.pack(">b", 2)),
            "does-not-decode": framed(order_id, b"\x02\xff\xff\xff")}


def stored(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        values, deadline = [], time.monotonic() + 10
        while len(values) < end and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in batch)
        return values
    finally:
        consumer.close()


def test_librdkafka_serializer_records_pass_and_bad_ones_get_invalid_record(setup):
    broker, client = setup
    topic, order_id, other_id = topic_with(broker, client)
    serializer = AvroSerializer(client, json.dumps(ORDER), conf={"auto.register.schemas": False})
    reports = {}

    def on_delivery(label):
        return lambda err, msg: reports.__setitem__(label, err)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    good = serializer({"id": 1, "item": "pen"}, SerializationContext(topic, MessageField.VALUE))
    producer.produce(topic, good, partition=0, on_delivery=on_delivery("good"))
    producer.flush(10)
    for label, value in bad_values(order_id, other_id).items():
        producer.produce(topic, value, partition=0, on_delivery=on_delivery(label))
        producer.flush(10)
    assert reports.pop("good") is None
    for label, err in reports.items():
        assert err is not None and err.code() == KafkaError.INVALID_RECORD, (label, err)
    assert stored(broker.bootstrap, topic) == [good]


def test_kafka_python_gets_the_brokers_reason(setup):
    broker, client = setup
    topic, order_id, other_id = topic_with(broker, client)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, retries=0)
    reasons = {}
    try:
        assert producer.send(topic, framed(order_id, avro_order(5)), partition=0).get(15).offset == 0
        for label, value in bad_values(order_id, other_id).items():
            with pytest.raises(InvalidRecordError) as refused:
                producer.send(topic, value, partition=0).get(15)
            reasons[label] = str(refused.value)
        # the broker keeps serving the producer
        assert producer.send(topic, framed(order_id, avro_order(6)), partition=0).get(15).offset == 1
    except KafkaPythonError as exc:
        pytest.fail(f"unexpected {exc!r}")
    finally:
        producer.close()
    assert "schema id" in reasons["unknown-id"] and "987654" in reasons["unknown-id"]
    assert f"{topic}-value" in reasons["other-subject"] and str(other_id) in reasons["other-subject"], reasons
    assert "wire format" in reasons["not-framed"].lower(), reasons
    assert f"does not match schema id {order_id}" in reasons["does-not-decode"], reasons


def test_decode_off_is_confluents_id_check(setup):
    broker, client = setup
    topic, order_id, other_id = topic_with(broker, client, **{"kwire.schema.validation.decode": "false"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, retries=0)
    try:
        undecodable = bad_values(order_id, other_id)["does-not-decode"]
        assert producer.send(topic, undecodable, partition=0).get(15).offset == 0     # the id is right
        with pytest.raises(InvalidRecordError):
            producer.send(topic, framed(987654, b""), partition=0).get(15)
    finally:
        producer.close()


def test_java_client_gets_invalid_record_exception(setup, tmp_path):
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    broker, client = setup
    topic, order_id, other_id = topic_with(broker, client)
    values = {"good": framed(order_id, avro_order(1)), **bad_values(order_id, other_id)}
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = start_java("JcRawValues", broker.bootstrap, topic, *(f"{k}={v.hex()}" for k, v in values.items()),
                          stdout=subprocess.PIPE, stderr=stderr)
        try:
            out, _ = proc.communicate(timeout=90)
        finally:
            stop(proc)
    assert "done" in out, (out, (tmp_path / "stderr.txt").read_text()[-3000:])
    lines = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    assert lines["good"] == "ok\t0"
    for label in bad_values(order_id, other_id):
        assert lines[label].startswith("error\tInvalidRecordException\t"), lines[label]
    assert "987654" in lines["unknown-id"]
    assert stored(broker.bootstrap, topic) == [values["good"]]
