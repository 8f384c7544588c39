"""Python record validators (topic config kwire.record.validator) through stock clients over real
sockets: kafka-python, confluent-kafka (librdkafka) and the Java client produce good and bad
records; good ones are read back, bad ones come back as INVALID_RECORD with the validator's
message, nothing of a refused batch is appended, a slow validator is cut off by its time box
while the broker keeps answering, and a validator outside the allow-list is refused."""
from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import InvalidConfigurationError, InvalidRecordError, KafkaError

import kwire.testing
from tests.support.java import java_available, start_java, stop

pytestmark = pytest.mark.clients

ALLOWED = "kwire.schemas.validator_examples,tests.schemas.record_validators"
NO_PII = "kwire.schemas.validator_examples:no_pii"
JAVA_SOURCES = Path(__file__).parent / "java"


@pytest.fixture(scope="module")
def kwire_broker():
    with kwire.testing.broker(properties={"kwire.record.validator.allowed.modules": ALLOWED}) as b:
        yield b


def validated_topic(broker, validator: str = NO_PII, **configs) -> str:
    return broker.create_topic(f"validated-{uuid.uuid4().hex[:8]}", 1,
                               {"kwire.record.validator": validator, **configs})


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of partition 0, from the start to the end offset."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        consumer.seek_to_beginning(tp)
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while len(values) < end and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in batch)
        return values
    finally:
        consumer.close()


def send_wait(producer, topic: str, value: bytes):
    """The record's offset, or the exception its future failed with."""
    try:
        return producer.send(topic, value, partition=0).get(timeout=15).offset
    except KafkaError as exc:
        return exc


def test_kafka_python(kwire_broker):
    topic = validated_topic(kwire_broker)
    producer = KafkaProducer(bootstrap_servers=kwire_broker.bootstrap, linger_ms=0, retries=0)
    try:
        assert send_wait(producer, topic, b"hello") == 0
        refused = send_wait(producer, topic, b"mail me at jane@example.com")
        assert isinstance(refused, InvalidRecordError), refused
        assert "value contains an e-mail address at character 11" in str(refused)
        assert send_wait(producer, topic, b"still serving") == 1
    finally:
        producer.close()
    # one batch of three, the middle one bad: none of them is appended (flush() sends the batch)
    lingering = KafkaProducer(bootstrap_servers=kwire_broker.bootstrap, linger_ms=10_000, retries=0)
    try:
        futures = [lingering.send(topic, v, partition=0) for v in (b"a", b"ssn 123-45-6789", b"b")]
        lingering.flush()
        outcomes = [f.exception for f in futures]
    finally:
        lingering.close()
    assert isinstance(outcomes[1], InvalidRecordError)
    assert "value contains a US social security number" in str(outcomes[1])
    assert all("part of a batch which had one more more invalid records" in str(o) for o in (outcomes[0], outcomes[2]))
    assert read_values(kwire_broker.bootstrap, topic) == [b"hello", b"still serving"]


def test_confluent_kafka(kwire_broker):
    from confluent_kafka import KafkaError as CKError, Producer
    topic = validated_topic(kwire_broker)
    results: dict[bytes, object] = {}
    producer = Producer({"bootstrap.servers": kwire_broker.bootstrap, "linger.ms": 0, "retries": 0})

    def delivered(err, msg):
        results[msg.value()] = err if err is not None else msg.offset()

    for value in (b"first", b"card 4111 1111 1111 1111", b"second"):
        producer.produce(topic, value, partition=0, on_delivery=delivered)
        producer.flush(15)
    assert results[b"first"] == 0 and results[b"second"] == 1, results
    err = results[b"card 4111 1111 1111 1111"]
    # librdkafka (2.16) reads the response's error_message and record_errors but hands the
    # application only the code: "Broker: Broker failed to validate record", a permanent error
    assert err.code() == CKError.INVALID_RECORD and not err.retriable(), err
    assert read_values(kwire_broker.bootstrap, topic) == [b"first", b"second"]


def test_java_client(kwire_broker, tmp_path):
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    topic = validated_topic(kwire_broker)
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = start_java("JcValidatedProducer", kwire_broker.bootstrap, topic, sources=JAVA_SOURCES,
                          stdout=subprocess.PIPE, stderr=stderr)
        try:
            out, _ = proc.communicate(timeout=90)
        finally:
            stop(proc)
    lines = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    assert "done" in out, (out, (tmp_path / "stderr.txt").read_text()[-3000:])
    assert lines["single-good-1"] == "ok\t0" and lines["single-good-2"] == "ok\t1", lines
    assert lines["single-bad"] == "error\tInvalidRecordException\tvalue contains an e-mail address at character 5"
    assert lines["batch-bad"] == "error\tInvalidRecordException\tvalue contains a payment card number at character 5"
    for label in ("batch-good-a", "batch-good-b"):
        assert lines[label].startswith("error\tKafkaException\tFailed to append record because it was part of a "
                                       "batch which had one more more invalid records"), lines[label]
    assert read_values(kwire_broker.bootstrap, topic) == [b"hello from java", b"still going"]


def test_a_json_schema_validator(kwire_broker):
    topic = validated_topic(kwire_broker, "kwire.schemas.validator_examples:example_order")
    producer = KafkaProducer(bootstrap_servers=kwire_broker.bootstrap, linger_ms=0, retries=0)
    try:
        assert send_wait(producer, topic, b'{"id": 7, "amount": 12.5, "currency": "EUR"}') == 0
        refused = send_wait(producer, topic, b'{"id": 8, "amount": 1, "currency": "euro"}')
        assert "value does not match the JSON schema: 'euro' does not match '^[A-Z]{3}$' at $.currency" in str(refused)
        assert "value is not JSON" in str(send_wait(producer, topic, b"id=9"))
    finally:
        producer.close()
    assert read_values(kwire_broker.bootstrap, topic) == [b'{"id": 7, "amount": 12.5, "currency": "EUR"}']


def test_a_slow_validator_is_cut_off_and_the_broker_keeps_serving(kwire_broker):
    slow = validated_topic(kwire_broker, "tests.schemas.record_validators:slow",
                           **{"kwire.record.validator.timeout.ms": "200"})
    plain = kwire_broker.create_topic(partitions=1)
    producer = KafkaProducer(bootstrap_servers=kwire_broker.bootstrap, linger_ms=0, retries=0)
    other = KafkaProducer(bootstrap_servers=kwire_broker.bootstrap, linger_ms=0)
    try:
        other.send(plain, b"warm-up", partition=0).get(timeout=10)
        outcome: dict = {}

        def slow_send():
            started = time.monotonic()
            outcome["result"] = send_wait(producer, slow, b"anything")
            outcome["took"] = time.monotonic() - started

        sender = threading.Thread(target=slow_send)
        sender.start()
        time.sleep(0.05)               # the validator is running (or the request is on its way)
        latencies = []
        for i in range(5):             # meanwhile, other produces are answered at once
            started = time.monotonic()
            other.send(plain, b"meanwhile %d" % i, partition=0).get(timeout=10)
            latencies.append(time.monotonic() - started)
        sender.join(15)
    finally:
        producer.close()
        other.close()
    assert isinstance(outcome["result"], InvalidRecordError), outcome
    assert f"record validator tests.schemas.record_validators:slow on topic {slow} partition 0 timed out " \
           "after 200 ms" in str(outcome["result"])
    # the validator sleeps 3 s: on the event loop, both would take that long
    assert outcome["took"] < 2, outcome
    assert max(latencies) < 2, latencies
    assert read_values(kwire_broker.bootstrap, slow) == []


def test_a_validator_outside_the_allow_list_is_refused(kwire_broker):
    for spec in ("os:system", "subprocess:run", "kwire.schemas.validator_examples:nope", "not-an-entry-point"):
        with pytest.raises(InvalidConfigurationError, match="kwire.record.validator"):
            kwire_broker.create_topic(configs={"kwire.record.validator": spec})
    topic = kwire_broker.create_topic(partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=kwire_broker.bootstrap)
    try:
        for incremental in (True, False):         # IncrementalAlterConfigs, AlterConfigs
            resource = ConfigResource(ConfigResourceType.TOPIC, topic, configs={"kwire.record.validator": "os:system"})
            answer = admin.alter_configs([resource], incremental=incremental)["topic"][topic]
            assert str(answer).startswith("[Error 40] InvalidConfigurationError: Invalid value os:system for "
                                          "configuration kwire.record.validator: module os is not allowed"), answer
    finally:
        admin.close()
