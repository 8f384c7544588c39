"""KIP-848 consumer groups inside an in-process broker: which APIs are advertised for the
rebalance protocols configured, and the per-group metrics of a consumer group."""
from __future__ import annotations

import trio

from kwire.groups import OffsetCommit
from kwire.groups.results import ConsumerHeartbeat
from kwire.handlers.api_versions import api_keys
from kwire.metrics_collector import consumer_group_families
from tests.support.inprocess import broker_in_process, run_with


def advertised(properties) -> set[int]:
    keys: set[int] = set()

    async def check(broker):
        keys.update(k["api_key"] for k in api_keys(broker.config))
    run_with(check, broker_in_process(properties, topics={}))
    return keys


def test_consumer_group_apis_follow_the_rebalance_protocols():
    assert {68, 69} <= advertised({})
    assert not {68, 69} & advertised({"group.coordinator.rebalance.protocols": "classic"})
    assert {11, 14} <= advertised({"group.coordinator.rebalance.protocols": "classic"})


def test_a_consumer_group_has_member_and_lag_metrics():
    async def check(broker):
        service = broker.groups
        result = await service.consumer_heartbeat(ConsumerHeartbeat(
            group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=("t",), owned=()))
        assert result.member_epoch == 1 and len(result.assignment[broker.logs.get("t").topic_id]) == 2
        assert await service.commit_offsets("cg", 1, "m1", None, [OffsetCommit("t", 0, 0)]) == [0]
        _current, lag, _cs, _ls, members = consumer_group_families(broker)
        assert [(s.labels, s.value) for s in members.samples] == [({"consumergroup": "cg"}, 1)]
        assert {s.labels["partition"] for s in lag.samples if s.labels["consumergroup"] == "cg"} == {"0", "1"}
        await trio.sleep(0)
    run_with(check, broker_in_process({}, topics={"t": 2}))
