"""The KIP-714 rules, sans-I/O: subscription configs, matching, Get/Push checks, payload bounds."""
from __future__ import annotations

import gzip
import uuid

import pytest

from kwire.admin.client_metrics import (ALL_METRICS, DEFAULT_INTERVAL_MS, ClientMetricsManager, decompress_payload,
                                        subscription)
from kwire.codecs import compression
from kwire.codecs.errors import ErrorCode as E, KafkaApiError

ATTRS = {"client_id": "app-1", "client_software_name": "apache-kafka-java", "client_software_version": "4.0.0",
         "client_source_address": "127.0.0.1", "client_source_port": "50000"}
ZERO = uuid.UUID(int=0)


def code(call) -> E:
    with pytest.raises(KafkaApiError) as info:
        call()
    return info.value.code


def test_configs_are_checked_as_kafka_checks_them():
    sub = subscription("s", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.",
                             "interval.ms": "1000", "match": "client_id=app-.*,client_software_name=apache.*"})
    assert sub.metrics == {"org.apache.kafka.producer.", "org.apache.kafka.consumer."} and sub.interval_ms == 1000
    assert sub.matches(ATTRS) and not sub.matches(dict(ATTRS, client_id="other"))
    assert not subscription("s", {"match": "client_id=app"}).matches(ATTRS)        # the whole value
    assert subscription("s", {}).interval_ms == DEFAULT_INTERVAL_MS and subscription("s", {}).matches({})
    assert code(lambda: subscription("", {})) == E.INVALID_REQUEST
    assert code(lambda: subscription("s", {"nope": "1"})) == E.INVALID_REQUEST
    for bad in ("99", "3600001"):
        assert code(lambda: subscription("s", {"interval.ms": bad})) == E.INVALID_REQUEST
    assert code(lambda: subscription("s", {"interval.ms": "x"})) == E.INVALID_CONFIG
    for bad in ("host=a", "client_id", "client_id=(", "client_id=a=b"):
        assert code(lambda: subscription("s", {"match": bad})) == E.INVALID_CONFIG


def manager(**subs) -> ClientMetricsManager:
    m = ClientMetricsManager(telemetry_max_bytes=1000, max_instances=3)
    m.set_subscriptions(subs)
    return m


def test_get_assigns_an_id_and_the_matching_subscriptions():
    m = manager(p={"metrics": "org.apache.kafka.producer.", "interval.ms": "2000", "match": "client_id=app-.*"},
                c={"metrics": "org.apache.kafka.consumer.", "interval.ms": "500", "match": "client_id=other"})
    fresh = uuid.uuid4()
    r = m.get_subscriptions(ZERO, ATTRS, 0, fresh)
    assert r["client_instance_id"] == fresh and r["requested_metrics"] == ["org.apache.kafka.producer."]
    assert r["push_interval_ms"] == 2000 and r["telemetry_max_bytes"] == 1000 and r["delta_temporality"]
    assert r["accepted_compression_types"] == [4, 3, 1, 2]
    again = m.get_subscriptions(fresh, ATTRS, 2000, uuid.uuid4())
    assert again["client_instance_id"] == ZERO and again["subscription_id"] == r["subscription_id"]
    assert code(lambda: m.get_subscriptions(fresh, ATTRS, 2500, uuid.uuid4())) == E.THROTTLING_QUOTA_EXCEEDED
    m.set_subscriptions({"all": {"metrics": "*", "interval.ms": "1000"}})
    r2 = m.get_subscriptions(fresh, ATTRS, 5000, uuid.uuid4())
    assert r2["requested_metrics"] == [ALL_METRICS] and r2["subscription_id"] != r["subscription_id"]
    m.set_subscriptions({})
    none = m.get_subscriptions(fresh, ATTRS, 10000, uuid.uuid4())
    assert none["requested_metrics"] == [] and none["push_interval_ms"] == DEFAULT_INTERVAL_MS


def test_push_checks_in_kafkas_order():
    m = manager(s={"metrics": "*", "interval.ms": "1000"})
    dropped = []
    m.on_drop = dropped.append
    iid = uuid.uuid4()
    sub = m.get_subscriptions(ZERO, ATTRS, 0, iid)["subscription_id"]
    push = lambda now, **kw: m.push(kw.get("iid", iid), kw.get("sub", sub), kw.get("term", False),  # noqa: E731
                                    kw.get("ct", 0), kw.get("data", b"x"), ATTRS, now)
    assert code(lambda: push(10, iid=ZERO)) == E.INVALID_REQUEST
    assert push(10)[1] == b"x"                         # the first push after a Get: always taken
    assert code(lambda: push(500)) == E.THROTTLING_QUOTA_EXCEEDED
    assert code(lambda: push(1100, sub=sub + 1)) == E.UNKNOWN_SUBSCRIPTION_ID
    assert code(lambda: push(2200, ct=9)) == E.UNSUPPORTED_COMPRESSION_TYPE
    assert code(lambda: push(3300, data=b"y" * 1001)) == E.TELEMETRY_TOO_LARGE
    assert code(lambda: push(4400, ct=compression.GZIP, data=b"garbage")) == E.INVALID_RECORD
    assert push(5500, ct=compression.GZIP, data=gzip.compress(b"otlp"))[1] == b"otlp"
    m.set_subscriptions({"s": {"metrics": "*", "interval.ms": "2000"}})
    assert code(lambda: push(6600)) == E.UNKNOWN_SUBSCRIPTION_ID       # the subscriptions changed
    push(6700, term=True, sub=m.instances[iid].subscription_id)        # terminating: never throttled
    assert code(lambda: push(9000, sub=m.instances[iid].subscription_id)) == E.INVALID_REQUEST


def test_payload_bounds_come_before_and_after_decompression():
    assert code(lambda: decompress_payload(compression.GZIP, b"z" * 11, 10)) == E.TELEMETRY_TOO_LARGE
    bomb = gzip.compress(b"\0" * (2 << 20))
    assert len(bomb) < 10_000
    assert code(lambda: decompress_payload(compression.GZIP, bomb, 10_000)) == E.TELEMETRY_TOO_LARGE
    assert decompress_payload(compression.ZSTD, compression.compress(compression.ZSTD, b"ab" * 100), 1000) \
        == b"ab" * 100


def test_instances_expire_and_are_bounded():
    m = manager(s={"metrics": "*", "interval.ms": "100"})
    dropped = []
    m.on_drop = dropped.append
    ids = [uuid.uuid4() for _ in range(4)]
    for i, iid in enumerate(ids):
        m.get_subscriptions(ZERO, ATTRS, i, iid)
    assert dropped == [ids[0]] and len(m.instances) == 3          # max_instances, oldest first
    m.expire(3 + 60_000)
    assert set(dropped) == set(ids)
