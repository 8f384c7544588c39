"""GetTelemetrySubscriptions (71), PushTelemetry (72) and ListConfigResources (74): client
telemetry (KIP-714).  The rules are ``kwire.admin.client_metrics``; the subscriptions and the
pushed metrics live in ``kwire.services.client_metrics`` (``broker.client_metrics``).

71 and 72 are served only with ``prometheus.listener`` set: the pushed metrics go to /metrics,
and Kafka likewise advertises them only when a telemetry receiver is configured.  Neither
checks an ACL (Kafka's neither does); ListConfigResources needs DESCRIBE_CONFIGS on the cluster
(``kwire.admin.acl_operations``).
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.handlers.registry import handles
from kwire.services.client_metrics import client_attributes

TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32


def _telemetry_served(config) -> bool:
    return bool(config.value_of("prometheus.listener"))


def _attributes(ctx) -> dict:
    return client_attributes(ctx.client_id, ctx.client_software, ctx.peer)


@handles(71, 0, 0, enabled=_telemetry_served)
async def handle_get_telemetry_subscriptions(ctx, request):
    fields = ctx.broker.client_metrics.get_subscriptions(request.client_instance_id, _attributes(ctx))
    return {"throttle_time_ms": 0, **fields}


@handles(72, 0, 0, enabled=_telemetry_served)
async def handle_push_telemetry(ctx, request):
    ctx.broker.client_metrics.push(request, _attributes(ctx), ctx.principal)
    return {"throttle_time_ms": 0, "error_code": 0}


def _names(ctx, resource_type: int) -> list[str]:
    broker = ctx.broker
    if resource_type == CLIENT_METRICS:
        return broker.client_metrics.names()
    if resource_type == GROUP:
        return sorted(broker.shares.group_configs.configs)
    if resource_type == TOPIC:
        return sorted(broker.logs.topics)
    if resource_type == BROKER:
        return [str(broker.node_id)]
    raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION, f"resource type {resource_type} cannot be listed")


@handles(74, 0, 1)
async def handle_list_config_resources(ctx, request):
    """v0 (ListClientMetricsResources) lists the client-metrics subscriptions; v1 the resources
    of the types asked for (none: client metrics, groups, topics and this broker)."""
    asked = list(getattr(request, "resource_types", None) or ()) if ctx.api_version >= 1 else [CLIENT_METRICS]
    types = asked or [CLIENT_METRICS, GROUP, TOPIC, BROKER]
    resources = [{"resource_name": name, "resource_type": t} for t in types for name in _names(ctx, t)]
    return {"throttle_time_ms": 0, "error_code": 0, "config_resources": resources}
