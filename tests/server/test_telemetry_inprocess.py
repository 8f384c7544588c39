"""KIP-714 over the wire, in process: subscriptions through the config APIs, Get and Push,
the pushed metrics on /metrics, and the refusals (oversize, garbage, unknown subscription)."""
from __future__ import annotations

import uuid

import trio
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2

from kwire.codecs import messages
from kwire.codecs.errors import ErrorCode as E
from kwire.codecs.specs import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from tests.server.test_connection_inprocess import connected, real_time, run
from tests.server.test_metrics_exposition import scrape

ON = {"prometheus.listener": "127.0.0.1:0", "telemetry.max.bytes": "2000"}
Incremental = IncrementalAlterConfigsRequest.AlterConfigsResource
ZERO = uuid.UUID(int=0)


def otlp(name: str, value: float, **attributes) -> bytes:
    point = metrics_pb2.NumberDataPoint(as_double=value, attributes=[
        KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()])
    metric = metrics_pb2.Metric(name=name, gauge=metrics_pb2.Gauge(data_points=[point]))
    return metrics_pb2.MetricsData(resource_metrics=[metrics_pb2.ResourceMetrics(scope_metrics=[
        metrics_pb2.ScopeMetrics(metrics=[metric])])]).SerializeToString()


async def set_subscription(client, name: str, **configs):
    with real_time():
        r = await client.call(IncrementalAlterConfigsRequest, 1, validate_only=False, resources=[
            Incremental(resource_type=16, resource_name=name, configs=[
                Incremental.AlterableConfig(name=k.replace("_", "."), config_operation=0 if v is not None else 1,
                                            value=v) for k, v in configs.items()])])
    return r.responses[0].error_code


def test_apis_are_advertised_only_with_a_metrics_listener(tmp_path):
    async def scenario():
        for props, served in (({}, False), (ON, True)):
            async with connected(tmp_path / str(served), **props) as (_broker, client):
                keys = {k.api_key for k in (await client.call(ApiVersionsRequest, 3, client_software_name="t",
                                                              client_software_version="1")).api_keys}
                assert ({71, 72} <= keys) == served and 74 in keys
    run(scenario)


def test_a_push_reaches_metrics_and_bad_pushes_are_refused(tmp_path):
    async def scenario():
        async with connected(tmp_path, **ON) as (broker, client):
            assert await set_subscription(client, "s", metrics="org.apache.kafka.", interval_ms="1000",
                                          match="client_id=inproc") == 0
            assert await set_subscription(client, "bad", interval_ms="5") == E.INVALID_REQUEST
            d = await client.call(DescribeConfigsRequest, 4, include_synonyms=False, include_documentation=False,
                                  resources=[DescribeConfigsRequest.DescribeConfigsResource(
                                      resource_type=16, resource_name="s", configuration_keys=None)])
            assert {c.name: c.value for c in d.results[0].configs}["interval.ms"] == "1000"
            listed = await client.call(messages.API_CLASSES[74][0], 0)
            assert [r.resource_name for r in listed.config_resources] == ["s"]

            g = await client.call(GetTelemetrySubscriptionsRequest, 0, client_instance_id=ZERO)
            assert g.error_code == 0 and g.requested_metrics == ["org.apache.kafka."] and g.push_interval_ms == 1000
            iid, sub = g.client_instance_id, g.subscription_id

            def push(metrics: bytes, **kw):
                return client.call(PushTelemetryRequest, 0, client_instance_id=iid, subscription_id=sub,
                                   terminating=False, compression_type=kw.get("ct", 0), metrics=metrics)
            assert (await push(otlp("org.apache.kafka.consumer.fetch.manager.fetch.latency.avg", 12.5,
                                    node_id="1"))).error_code == 0
            families = scrape(broker)
            (labels, value), = [(dict(k[1]), v) for k, v in
                                families["kwire_client_consumer_fetch_manager_fetch_latency_avg"][1].items()]
            assert value == 12.5 and labels == {"client_id": "inproc", "client_instance_id": str(iid),
                                                "principal": "User:ANONYMOUS", "node_id": "1"}
            assert (await push(b"x")).error_code == E.THROTTLING_QUOTA_EXCEEDED
            await trio.sleep(1.1)
            assert (await push(b"x" * 2001)).error_code == E.TELEMETRY_TOO_LARGE
            await trio.sleep(1.1)
            assert (await push(b"\xff\xff\xff garbage")).error_code == E.INVALID_RECORD
            await trio.sleep(1.1)
            assert (await client.call(PushTelemetryRequest, 0, client_instance_id=iid, subscription_id=sub + 1,
                                      terminating=False, compression_type=0, metrics=b"")).error_code \
                == E.UNKNOWN_SUBSCRIPTION_ID
            # the subscription no longer matches: the client asks again, is asked for nothing,
            # and its metrics leave /metrics
            assert await set_subscription(client, "s", match="client_id=someone-else") == 0
            g2 = await client.call(GetTelemetrySubscriptionsRequest, 0, client_instance_id=iid)
            assert g2.error_code == 0 and g2.requested_metrics == []
            assert "kwire_client_consumer_fetch_manager_fetch_latency_avg" not in scrape(broker)
    run(scenario)
