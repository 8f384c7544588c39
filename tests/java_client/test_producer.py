"""Apache Kafka's KafkaProducer (Java client 4.0) against kwire: ``tests/java/JcProducer.java``.

One JVM run per module.  Every check wrote records and read them back with a Java consumer;
the tests check the acknowledgements and what came back."""
from __future__ import annotations

import pytest

from tests.java_client.conftest import run_checks

COUNT = 600                         # JcProducer.COUNT
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def producer(kwire_broker, tmp_path_factory):
    return run_checks(tmp_path_factory, "JcProducer", kwire_broker.bootstrap)


def read_back_intact(read: dict, count: int = COUNT) -> None:
    assert read == {"records": count, "values_match": count, "ordered": True, "distinct_keys": count,
                    "duplicates": 0}


def test_acks_all_every_record_acknowledged_once_at_consecutive_offsets(producer):
    r = producer["acks_all"]
    assert r["acked"] == {str(p): {"acked": COUNT // 3, "contiguous_from_0": True} for p in range(3)}
    assert (r["record_error_total"], r["record_retry_total"]) == (0.0, 0.0)
    read_back_intact(r["read"])


def test_default_producer_is_idempotent_and_the_broker_tracks_its_sequence(producer):
    r = producer["idempotent"]
    assert r["acked"] == {"0": {"acked": COUNT, "contiguous_from_0": True}}
    # DescribeProducers: one producer id on the partition, its last sequence = the last record's
    [state] = r["producers"]
    assert state["producer_id"] >= 0 and state["epoch"] >= 0
    assert state["last_sequence"] == COUNT - 1
    read_back_intact(r["read"])


@pytest.mark.parametrize("codec", CODECS)
def test_every_compression_type_round_trips(producer, codec):
    r = producer[f"compression_{codec}"]
    assert r["acked"] == {"0": {"acked": COUNT, "contiguous_from_0": True}}
    assert r["record_error_total"] == 0.0
    read_back_intact(r["read"])
    if codec == "none":
        assert r["compression_rate_avg"] == 1.0
    else:                           # the batches really were compressed (the values repeat)
        assert r["compression_rate_avg"] < 0.5


def test_headers_round_trip_in_order_with_repeats_empty_null_binary_and_unicode(producer):
    records = producer["headers"]["records"]
    assert [r["offset"] for r in records] == [0, 1, 2, 3]
    for i, r in enumerate(records[:3]):
        assert r["headers"] == [["trace-id", f"trace-{i}"], ["repeated", "one"], ["repeated", "two"],
                                ["empty", ""], ["null-value", None], ["binary", "<256 bytes 0..255>"],
                                ["\u00fcn\u00efc\u00f8d\u00e9", "\u2713"]]
        assert r["last_repeated"] == "two"
    assert records[3]["headers"] == [] and records[3]["last_repeated"] is None


def test_large_records_near_max_request_size(producer):
    r = producer["large"]
    # just under max.request.size (1 MiB): accepted and read back byte for byte
    assert (r["under_offset"], r["under_value_size"]) == (0, 1_047_552)
    assert r["read"] == [{"offset": 0, "key": "under", "size": 1_047_552, "intact": True},
                         {"offset": 1, "key": "after", "size": 10, "intact": True}]
    # just over: the client refuses it before sending
    assert r["over_client"] == "RecordTooLargeException"
    # a client allowed bigger requests: the broker's message.max.bytes (1048588) refuses it
    # (MESSAGE_TOO_LARGE), as does a topic's lower max.message.bytes, and nothing is written
    assert r["over_broker_limit"] == "RecordTooLargeException"
    assert r["over_topic_limit"] == "RecordTooLargeException"
    assert r["after_offset"] == 1
    assert producer["done"]["ok"]
