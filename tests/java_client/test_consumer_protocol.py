"""Apache Kafka's KafkaConsumer (Java client 4.0) with group.protocol=consumer (KIP-848) against
kwire: ``tests/java/JcConsumerProtocol.java``, one JVM run for the module.  Two members per
server-side assignor (uniform, range); members commit after every poll and on revocation, so
"exactly once" below means: each record reached one member, once."""
from __future__ import annotations

from collections import Counter

import pytest

import kwire.testing
from tests.java_client.conftest import run_checks

GROUP_PROPS = {"group.consumer.session.timeout.ms": 10000, "group.consumer.min.session.timeout.ms": 1000,
               "group.consumer.heartbeat.interval.ms": 300, "group.consumer.min.heartbeat.interval.ms": 100}


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    with kwire.testing.broker(properties=GROUP_PROPS) as b:
        yield run_checks(tmp_path_factory, "JcConsumerProtocol", b.bootstrap, timeout=180)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_two_members_split_the_partitions_and_each_record_reaches_one(checks, assignor):
    r = checks[assignor]
    assert r["a_alone"] and r["shared"] and r["a_regains_all"]
    d = r["group_description"]
    assert (d["type"], d["assignor"]) == ("Consumer", assignor)
    assert sorted(p for m in d["members"] for p in m["assignment"]) == [0, 1, 2, 3]
    assert r["total_records"] == 60
    counts = Counter((p, o) for m in (r["a_after_join"], r["b_after_join"])
                     for p, offsets in m["records"].items() for o in offsets)
    assert sorted(counts) == sorted((str(p), o) for p in range(4) for o in range(15))
    assert max(counts.values()) == 1
    assert r["a_after_join"]["error"] is None and r["b_after_join"]["error"] is None
    assert r["a_final"]["owns"] == [0, 1, 2, 3]
