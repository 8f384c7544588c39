"""The Java client's KafkaShareConsumer (share APIs v0, ``tests/java/JcShareConsumer.java``) on
the three-broker cluster: membership at the group's coordinator, ShareFetch and
ShareAcknowledge at the partition's leader, the delivery state at its share coordinator,
and the group config (share.auto.offset.reset) set with Admin through ZooKeeper.  The same
checks as on one broker (tests/java_client/test_share_consumer.py)."""
from __future__ import annotations

import pytest

from tests.cluster.test_cluster_share_groups import SHARE_PROPERTIES
from tests.java_client.conftest import run_checks
from tests.support.java import java_available


@pytest.fixture
def checks(cluster_factory, tmp_path_factory):
    ok, why = java_available()
    if not ok:
        pytest.skip(f"the Java client cannot run here: {why}")
    cluster = cluster_factory(3, properties=SHARE_PROPERTIES)
    return run_checks(tmp_path_factory, "JcShareConsumer", cluster.bootstrap, timeout=180)


def test_java_share_consumers_on_three_brokers(checks):
    r = checks["share_group"]
    assert r["missing"] == [] and r["twice"] == []
    assert r["received"] == r["produced"] >= 300
    assert len(r["per_consumer"]) == 3 and all(n > 0 for n in r["per_consumer"]), r["per_consumer"]
    d = r["described"]
    assert d["state"].lower() == d["listed_state"].lower() == "stable"
    assert d["member_id_lengths"] == [22, 22, 22] and d["assigned_partitions"] == [1, 1, 1]
    release = checks["share_release"]
    assert (release["keep"], release["again"], release["drop"]) == (1, 2, 1)
