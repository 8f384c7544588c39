"""Share groups (KIP-932) from Apache Kafka's Java client: ``tests/java/JcShareConsumer.java``.

One JVM run for the module against an in-process broker.  The 4.0 snapshot in ``../shared/jars``
speaks the share APIs' version 0 (Kafka 4.0's early-access form), which kwire serves beside
version 1 (librdkafka's, ``tests/integration/test_share_groups.py``)."""
from __future__ import annotations

import pytest

import kwire.testing
from tests.java_client.conftest import run_checks


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    # members heartbeat at the broker's interval: 500 ms keeps joining short
    with kwire.testing.broker(properties={"group.share.min.heartbeat.interval.ms": 500,
                                          "group.share.heartbeat.interval.ms": 500}) as b:
        yield run_checks(tmp_path_factory, "JcShareConsumer", b.bootstrap, timeout=150)


def test_three_share_consumers_get_every_record_of_one_partition_once(checks):
    r = checks["share_group"]
    assert r["missing"] == [] and r["twice"] == []
    assert r["received"] == r["produced"] >= 300
    assert len(r["per_consumer"]) == 3
    assert all(n > 0 for n in r["per_consumer"]), r["per_consumer"]      # they share the partition


def test_list_and_describe_show_the_group_and_its_members_with_kafka_style_ids(checks):
    d = checks["share_group"]["described"]
    assert d["state"].lower() == "stable"
    assert d["listed_state"].lower() == "stable"           # Admin.listShareGroups (ListGroups v5)
    assert d["member_id_lengths"] == [22, 22, 22]          # base64 of a 16-byte Uuid, as Kafka's
    assert d["assigned_partitions"] == [1, 1, 1]           # share groups share partitions
    assert checks["share_group"]["members_after_close"] == 0


def test_a_released_record_comes_back_and_a_rejected_one_does_not(checks):
    r = checks["share_release"]
    assert (r["keep"], r["again"], r["drop"]) == (1, 2, 1)
