"""Poison batches are refused per partition; consumers then read exactly the good records.

Each poison batch has a valid header and CRC (the old checks) and is sent in a
raw Produce v8 request (kafka-python's protocol classes over a plain socket),
next to a good batch for another partition.  Stock consumers (librdkafka and
kafka-python) must then read the good records and reach the end, and the log
end offset must not have moved past them.
"""
from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import InvalidRecordError
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from tests.codecs.test_validation import envelope, kp_batch, payload, simple
from tests.integration.test_cross_client import Raw

pytestmark = pytest.mark.clients

CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_TIMESTAMP, INVALID_RECORD = 2, 10, 32, 87


def _legacy_magic():
    batch = bytearray(simple(1))
    batch[16] = 1
    return bytes(batch)


def _zstd_bomb():
    # One zstd frame of 4096 RLE blocks of 128 KiB: 512 MiB from 16 KiB.
    rle = struct.pack("<I", (128 << 10) << 3 | 2)[:3] + b"\0"
    last = struct.pack("<I", (128 << 10) << 3 | 3)[:3] + b"\0"
    return envelope(struct.pack("<I", 0xFD2FB528) + bytes([0, 0x38]) + rle * 4095 + last,
                    count=1, codec=4)


POISON = {
    "gzip-garbage": (lambda: envelope(os.urandom(300), count=2, codec=1), CORRUPT_MESSAGE),
    "snappy-garbage": (lambda: envelope(os.urandom(300), count=2, codec=2), CORRUPT_MESSAGE),
    "lz4-garbage": (lambda: envelope(os.urandom(300), count=2, codec=3), CORRUPT_MESSAGE),
    "zstd-garbage": (lambda: envelope(os.urandom(300), count=2, codec=4), CORRUPT_MESSAGE),
    "garbage-records": (lambda: envelope(os.urandom(300), count=2), INVALID_RECORD),
    "claims-1000-holds-1": (lambda: envelope(payload(1, 0), count=1000), INVALID_RECORD),
    "gzip-claims-1000-holds-1": (lambda: envelope(payload(1, 1), count=1000, codec=1),
                                 INVALID_RECORD),
    "offset-delta-2^31-2": (lambda: envelope(payload(1, 0), count=2**31 - 1), INVALID_RECORD),
    "legacy-magic-1": (_legacy_magic, INVALID_RECORD),
    "zstd-bomb": (_zstd_bomb, MESSAGE_TOO_LARGE),
}


def create_topic(bootstrap, name, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                        operation_timeout=10)[name].result(15)


def produce_raw(raw: Raw, topic: str, by_partition: dict) -> dict:
    """One Produce v8 request (acks=-1) with a batch per partition; partition -> response."""
    R = ProduceRequest[8]
    req = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=p, records=b)
                                    for p, b in by_partition.items()])])
    return {p.index: p for p in raw.call(req, ProduceResponse).responses[0].partition_responses}


def read_confluent(bootstrap, topic, partition, timeout=20):
    """Every record from offset 0 until librdkafka reports the partition's end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([CkTopicPartition(topic, partition, 0)])
    out, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF:
                return out
            assert m.error() is None, m.error()
            out.append((m.offset(), m.value()))
    finally:
        c.close()
    raise AssertionError(f"librdkafka did not reach the end of {topic}; read {out}")


def read_kafka_python(bootstrap, topic, partition, timeout=20):
    """Every record from offset 0 until the consumer's position is the end offset."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    tp = KpTopicPartition(topic, partition)
    c.assign([tp])
    c.seek(tp, 0)
    end = c.end_offsets([tp])[tp]
    out, deadline = [], time.monotonic() + timeout
    try:
        while c.position(tp) < end and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=200).values():
                out.extend((m.offset, m.value) for m in batch)
        assert c.position(tp) == end, f"kafka-python stalled at {c.position(tp)} of {end}: {out}"
    finally:
        c.close()
    return out


def test_poison_batches_refused_and_consumers_read_the_good_records(broker):
    topic = f"poison-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    good = kp_batch([(b"k", b"good-0", [], None), (b"k", b"good-1", [], None)])
    raw = Raw(broker.bootstrap)
    try:
        assert produce_raw(raw, topic, {0: good})[0].error_code == 0
        for name, (make, code) in POISON.items():
            other = kp_batch([(b"k", f"p1-{name}".encode(), [], None)], codec=1)
            got = produce_raw(raw, topic, {0: make(), 1: other})
            assert (got[0].error_code, got[1].error_code) == (code, 0), (name, got[0])
            assert got[0].base_offset == -1 and got[0].error_message, name
        assert produce_raw(raw, topic, {0: good})[0].base_offset == 2
        assert raw.end_offset(topic, 0) == 4, "the log end offset moved past the good records"
    finally:
        raw.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip")
    assert producer.send(topic, b"good-after", partition=0).get(timeout=10).offset == 4
    producer.close()
    expected = [(0, b"good-0"), (1, b"good-1"), (2, b"good-0"), (3, b"good-1"), (4, b"good-after")]
    assert read_confluent(broker.bootstrap, topic, 0) == expected
    assert read_kafka_python(broker.bootstrap, topic, 0) == expected
    assert [v for _, v in read_kafka_python(broker.bootstrap, topic, 1)] == [
        f"p1-{name}".encode() for name in POISON]


def test_compacted_topic_refuses_null_keys_from_stock_producers(broker):
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    with pytest.raises(InvalidRecordError):
        kp.send(topic, b"no key", partition=0).get(timeout=10)
    assert kp.send(topic, b"keyed", key=b"k", partition=0).get(timeout=10).offset == 0
    kp.close()
    errors = []
    ck = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    ck.produce(topic, b"no key", partition=0, on_delivery=lambda e, m: errors.append(e))
    ck.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == INVALID_RECORD, errors
    raw = Raw(broker.bootstrap)
    try:
        got = produce_raw(raw, topic, {0: kp_batch([(b"a", b"1", [], None), (None, b"2", [], None)])})
        assert got[0].error_code == INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in got[0].record_errors] == [
            (1, "Compacted topic cannot accept message without key")]
        assert raw.end_offset(topic, 0) == 1
    finally:
        raw.close()


def test_timestamps_outside_the_topic_window_are_invalid_timestamp(broker):
    topic = f"ts-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, config={"message.timestamp.before.max.ms": "3600000",
                                                  "message.timestamp.after.max.ms": "3600000"})
    now = int(time.time() * 1000)
    errors = {}
    ck = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for name, ts in (("old", now - 7_200_000), ("now", now), ("future", now + 7_200_000)):
        ck.produce(topic, name.encode(), partition=0, timestamp=ts,
                   on_delivery=lambda e, m, name=name: errors.__setitem__(name, e))
        ck.flush(10)
    assert errors["now"] is None
    assert errors["old"].code() == INVALID_TIMESTAMP and errors["future"].code() == INVALID_TIMESTAMP
    assert read_confluent(broker.bootstrap, topic, 0) == [(0, b"now")]
