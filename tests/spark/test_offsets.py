"""Pure parts of the source: offset JSON, option mapping, rate limiting, range splitting,
and the layering rule (spark/ imports no kwire internals). No JVM needed."""
import ast
import json
import os

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kwire.spark.kafka_io import (assignment_from_json, kafka_params, offsets_from_json,
                                  offsets_to_json, subscription_strategy)
from kwire.spark.source import OffsetRange, _rate_limit, _split

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_offset_json_is_sparks_shape_and_canonical():
    offsets = {B0: 7, A1: 3, A0: 42}
    data = offsets_to_json(offsets)
    assert json.dumps(data) == '{"a": {"0": 42, "1": 3}, "b": {"0": 7}}'
    assert offsets_from_json(json.dumps(data)) == offsets
    # same offsets in any order → same string (Spark compares offsets as JSON text)
    assert json.dumps(offsets_to_json(dict(reversed(list(offsets.items()))))) == json.dumps(data)
    with pytest.raises(ValueError):
        offsets_from_json("earliest")
    with pytest.raises(ValueError):
        offsets_from_json('{"a": 3}')


def test_subscription_options():
    assert subscription_strategy({"subscribe": "b, a,a"}) == ("subscribe", ["a", "b"])
    assert subscription_strategy({"assign": '{"a":[1,0]}'}) == ("assign", [A0, A1])
    kind, pattern = subscription_strategy({"subscribepattern": "a.*"})
    assert kind == "pattern" and pattern.fullmatch("ab")
    for bad in ({}, {"subscribe": "a", "assign": '{"a":[0]}'}):
        with pytest.raises(ValueError):
            subscription_strategy(bad)
    assert assignment_from_json('{"b":[0],"a":[1]}') == [A1, B0]


def test_kafka_options_map_to_kafka_python():
    opts = {"kafka.bootstrap.servers": "h1:9092,h2:9092", "kafka.max.poll.records": "7",
            "kafka.isolation.level": "read_committed", "kafka.group.id": "ignored",
            "kafka.no.such.setting": "x", "subscribe": "t", "kafka.acks": "all",
            "kafka.enable.idempotence": "false"}
    c = kafka_params(opts, KafkaConsumer)
    assert c == {"bootstrap_servers": ["h1:9092", "h2:9092"], "max_poll_records": 7,
                 "isolation_level": "read_committed"}
    p = kafka_params(opts, KafkaProducer)
    assert p["acks"] == -1 and p["enable_idempotence"] is False
    with pytest.raises(ValueError):
        kafka_params({"subscribe": "t"}, KafkaConsumer)


def test_rate_limit_prorates_like_spark():
    start = {A0: 0, A1: 100}
    latest = {A0: 300, A1: 200, B0: 100}  # backlogs 300, 100, 100 (b is new: from 0)
    assert _rate_limit(start, latest, 1000) == latest
    assert _rate_limit(start, latest, 100) == {A0: 60, A1: 120, B0: 20}
    assert _rate_limit({A0: 0, A1: 0}, {A0: 1000, A1: 1}, 10) == {A0: 9, A1: 1}  # ceil below 1


def test_min_partitions_splits_ranges_without_gaps():
    ranges = [OffsetRange("a", 0, 0, 100), OffsetRange("a", 1, 10, 13)]
    assert _split(ranges, 2) == ranges
    out = _split(ranges, 8)
    for tp in ((("a", 0)), ("a", 1)):
        mine = [r for r in out if (r.topic, r.partition) == tp]
        assert all(a.until_offset == b.from_offset for a, b in zip(mine, mine[1:]))
    assert [r.from_offset for r in out if r.partition == 0][0] == 0
    assert sum(r.until_offset - r.from_offset for r in out) == 103
    assert len([r for r in out if r.partition == 0]) == 7


def test_spark_package_uses_no_kwire_internals():
    spark_dir = os.path.join(os.path.dirname(__file__), "..", "..", "spark")
    forbidden = ("kwire.codecs", "kwire.log", "kwire.groups", "kwire.admin", "kwire.server.connection",
                 "kwire.cli", "kwire.compat_tests")
    for name in sorted(os.listdir(spark_dir)):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(spark_dir, name)).read())
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                mods = [node.module or ""]
            for m in mods:
                assert not (m == "kwire" or m.startswith(forbidden)), f"{name} imports {m}"
