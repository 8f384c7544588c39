"""KIP-848 consumer groups inside an in-process broker: which APIs are advertised for the
rebalance protocols configured, and the per-group metrics of a consumer group."""
from __future__ import annotations

import trio

from kwire.groups import OffsetCommit
from kwire.groups.results import ConsumerHeartbeat
from kwire.handlers.api_versions import api_keys
from kwire.metrics.collector import consumer_group_families
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


def test_the_consumer_group_apis_need_read_and_describe_on_the_group():
    from tests.server.test_acl_groups_inprocess import Op, R, allow, call, run

    hb_fields = dict(group_id="g", member_id="m1", member_epoch=0, instance_id=None, rack_id=None,
                     rebalance_timeout_ms=30000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
                     server_assignor=None, topic_partitions=[])

    async def scenario(broker):
        denied = await call(broker, 68, 1, **hb_fields)
        assert (denied["error_code"], denied["member_epoch"], denied["assignment"]) == (30, 0, None)
        described = await call(broker, 69, 0, group_ids=["g"], include_authorized_operations=False)
        assert described["groups"][0]["error_code"] == 30
        allow(broker, R.GROUP, "g", Op.READ)
        joined = await call(broker, 68, 1, **hb_fields)
        assert (joined["error_code"], joined["member_id"], joined["member_epoch"]) == (0, "m1", 1)
        assert sorted(joined["assignment"]["topic_partitions"][0]["partitions"]) == [0, 1]
        allow(broker, R.GROUP, "g", Op.DESCRIBE)
        group = (await call(broker, 69, 1, group_ids=["g"], include_authorized_operations=True))["groups"][0]
        assert (group["error_code"], group["group_state"], group["group_epoch"]) == (0, "Stable", 1)
        member = group["members"][0]
        assert member["assignment"]["topic_partitions"][0]["topic_name"] == "t"
        assert group["authorized_operations"] == (1 << Op.READ) | (1 << Op.DESCRIBE)     # Kafka's bit field
        both = (await call(broker, 69, 0, group_ids=["g", "other"], include_authorized_operations=False))["groups"]
        assert [(g["group_id"], g["error_code"]) for g in both] == [("other", 30), ("g", 0)]     # denied first
    run(scenario)


def test_the_first_configured_assignor_is_the_default_and_class_names_are_accepted():
    async def check(broker):
        assert broker.groups.coordinator.config.consumer.assignors == ("range", "uniform")
        hb = dict(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                  subscribed_topic_names=("t",), owned=())
        assert (await broker.groups.consumer_heartbeat(ConsumerHeartbeat(**hb))).member_epoch == 1
        assert broker.groups.consumer_describe("g").assignor_name == "range"
        refused = await broker.groups.consumer_heartbeat(ConsumerHeartbeat(**dict(hb, member_id="m2"),
                                                                           server_assignor="sticky"))
        assert refused.error == 112 and "uniform" in refused.message          # UNSUPPORTED_ASSIGNOR
    run_with(check, broker_in_process(
        {"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"},
        topics={"t": 2}))


def test_the_consumer_group_timeouts_must_fit_their_ranges():
    import pytest

    from kwire.admin.broker_config import ConfigError, broker_config_from_properties
    broker_config_from_properties({})                                      # Kafka's defaults fit
    with pytest.raises(ConfigError, match="session.timeout.ms must be greater than or equal to "
                                          "group.consumer.min.session.timeout.ms"):
        broker_config_from_properties({"group.consumer.session.timeout.ms": "6000"})
    with pytest.raises(ConfigError, match="heartbeat.interval.ms must be less than group.consumer.session"):
        broker_config_from_properties({"group.consumer.session.timeout.ms": "45000",
                                       "group.consumer.heartbeat.interval.ms": "45000",
                                       "group.consumer.max.heartbeat.interval.ms": "60000"})
