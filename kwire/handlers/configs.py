"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic configs are validated, persisted with the topic and applied live.  In a
cluster they are written to ZooKeeper (/config/topics/<t>) and every broker
applies them when it reconciles; the answer waits until this broker has.
Broker configs come from server.properties, and those that can change at runtime
(``kwire.admin.dynamic_config``) also from AlterConfigs / IncrementalAlterConfigs on this
broker's id or on the cluster default ``""`` (``kwire.services.broker_configs``: a file on
one node, /config/brokers in a cluster); this broker applies them before answering.
Broker loggers have no configs to alter.  Client-metrics resources (16) are the KIP-714
telemetry subscriptions (``kwire.services.client_metrics``).

With an authorizer (Kafka's ConfigHelper and KafkaApis), each resource is checked before anything
else about it: DESCRIBE_CONFIGS (describe) or ALTER_CONFIGS (alter) on the topic for a topic
(refused: TOPIC_AUTHORIZATION_FAILED), on the cluster for a broker, broker logger or client
metrics resource (CLUSTER_AUTHORIZATION_FAILED), on the group for a group
(GROUP_AUTHORIZATION_FAILED); the other resources go on.  AlterConfigs, which Kafka rejects
outright for broker loggers and groups, checks neither (they answer INVALID_REQUEST here).
"""
from __future__ import annotations

from kwire.admin.acls import AclOperation
from kwire.admin.describe import describe_broker, describe_topic
from kwire.admin.dynamic_config import apply_incremental as apply_dynamic_incremental
from kwire.admin.topic_config import apply_incremental, validate_topic_configs
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.handlers import authz
from kwire.schemas.validators import check_topic_configs

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def check_broker_name(ctx, name: str) -> None:
    if name not in ("", str(ctx.broker.node_id)):
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.broker.node_id} "
                                                         f"or empty string, but received {name}")


def describe_one(ctx, request, r) -> dict:
    result = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
              "resource_name": r.resource_name, "configs": []}
    if ctx.broker.acls.enabled:
        refused = authz.config_resource_denied(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        if refused is not None:
            result.update(error_code=int(refused), error_message=authz.DEFAULT_MESSAGES[refused])
            return result
    synonyms = bool(getattr(request, "include_synonyms", False))
    docs = bool(getattr(request, "include_documentation", False))
    try:
        if r.resource_type == TOPIC:
            topic = ctx.broker.logs.get(r.resource_name)
            if topic is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    f"Topic '{r.resource_name}' does not exist.")
            entries = describe_topic(ctx.broker.config, topic.configs, r.configuration_keys, synonyms, docs)
        elif r.resource_type == BROKER:
            check_broker_name(ctx, r.resource_name)
            entries = describe_broker(ctx.broker.config, r.configuration_keys, synonyms, docs,
                                      per_broker=r.resource_name != "")
        elif r.resource_type == BROKER_LOGGER:
            entries = []
        elif r.resource_type == authz.GROUP_RESOURCE:       # share groups' configs (kwire.services.group_configs)
            result["configs"] = ctx.broker.shares.group_configs.describe(r.resource_name, r.configuration_keys)
            return result
        elif r.resource_type == authz.CLIENT_METRICS_RESOURCE:    # KIP-714 (kwire.services.client_metrics)
            result["configs"] = ctx.broker.client_metrics.describe(r.resource_name, r.configuration_keys)
            return result
        else:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {r.resource_type}")
    except KafkaApiError as exc:
        result.update(error_code=int(exc.code), error_message=exc.message)
        return result
    result["configs"] = [{
        "name": e.name, "value": e.value, "read_only": e.read_only, "is_default": e.is_default,
        "config_source": e.source, "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms] if synonyms else [],
        "config_type": e.config_type, "documentation": e.documentation} for e in entries]
    return result


@handles(32, 1, 4)
async def handle_describe_configs(ctx, request):
    return {"throttle_time_ms": 0, "results": [describe_one(ctx, request, r) for r in request.resources]}


async def alter_topic(ctx, name: str, new_configs: dict, validate_only: bool) -> None:
    topic = ctx.broker.logs.get(name)
    if topic is None:
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    configs = validate_topic_configs(new_configs)
    check_topic_configs(ctx.broker.config, configs)      # kwire.record.validator: the allow-list
    if validate_only:
        return
    await ctx.broker.topic_admin.set_configs(name, configs)     # a cluster's: in ZooKeeper, applied here


def current_topic_configs(ctx, name: str) -> dict:
    return ctx.broker.topology.topic_configs(name)      # the cluster's, when it knows the topic


async def alter_one(ctx, r, validate_only: bool, incremental: bool) -> dict:
    out = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
           "resource_name": r.resource_name}
    if ctx.broker.acls.enabled and (incremental or r.resource_type not in (BROKER_LOGGER, authz.GROUP_RESOURCE)):
        refused = authz.config_resource_denied(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
        if refused is not None:
            out["error_code"] = int(refused)
            return out
    try:
        if r.resource_type == TOPIC:
            current = current_topic_configs(ctx, r.resource_name)
            if incremental:
                ops = [(c.name, c.config_operation, c.value) for c in r.configs]
                new = apply_incremental(current, ops)
            else:
                new = {c.name: c.value for c in r.configs if c.value is not None}
            await alter_topic(ctx, r.resource_name, new, validate_only)
        elif r.resource_type == BROKER:
            check_broker_name(ctx, r.resource_name)
            if incremental:
                ops = [(c.name, c.config_operation, c.value) for c in r.configs]
                change = lambda current: apply_dynamic_incremental(current, ops, r.resource_name != "")  # noqa: E731
            else:
                change = lambda _current: {c.name: c.value for c in r.configs}      # noqa: E731
            await ctx.broker.broker_configs.alter(r.resource_name, change, validate_only)
        elif r.resource_type == BROKER_LOGGER:
            check_broker_name(ctx, r.resource_name)
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "kwire has no broker loggers to configure")
        elif r.resource_type == authz.GROUP_RESOURCE and incremental:     # kwire.services.group_configs
            await ctx.broker.shares.group_configs.alter(
                r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs], True, validate_only)
        elif r.resource_type == authz.CLIENT_METRICS_RESOURCE:    # kwire.services.client_metrics
            ops = ([(c.name, c.config_operation, c.value) for c in r.configs] if incremental
                   else [(c.name, c.value) for c in r.configs])
            await ctx.broker.client_metrics.alter(r.resource_name, ops, incremental, validate_only)
        else:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {r.resource_type}")
    except KafkaApiError as exc:
        out.update(error_code=int(exc.code), error_message=exc.message)
    return out


@handles(33, 0, 2)
async def handle_alter_configs(ctx, request):
    return {"throttle_time_ms": 0,
            "responses": [await alter_one(ctx, r, request.validate_only, False) for r in request.resources]}


@handles(44, 0, 1)
async def handle_incremental_alter_configs(ctx, request):
    return {"throttle_time_ms": 0,
            "responses": [await alter_one(ctx, r, request.validate_only, True) for r in request.resources]}
