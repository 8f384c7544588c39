"""Resource-level ACL checks of the topic, config and cluster APIs, made as Kafka's KafkaApis
makes them (``kwire.admin.acl_operations.API_ACLS`` lists them; the cluster-level ones are made
before dispatch, ``kwire.server.connection``).

Every handler tests ``ctx.broker.acls.enabled`` once and calls in here only when an authorizer
is on, so without one the handlers do exactly what they did before ACLs, at the cost of that
one test.  Each helper decides a name once per request (``Authorizer.filter_authorized``).

A denial the client is told about is logged at INFO on ``kwire.acls``, as Kafka's authorizer
logs it; a hidden one (``log=False``: topics left out of an all-topics Metadata, the cluster
checks that only widen a topic check) is not, as Kafka passes ``logIfDenied = false`` there.
Nothing here raises.
"""
from __future__ import annotations

import logging
from typing import Iterable

from kwire.admin.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from kwire.codecs.errors import ErrorCode

logger = logging.getLogger("kwire.acls")

Op, R = AclOperation, ResourceType
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED

# the *_authorized_operations bit field when every supported operation is allowed (no authorizer)
_ALL_OPERATIONS = {rtype: sum(1 << op for op in ops) for rtype, ops in SUPPORTED_OPERATIONS.items()}


def log_denied(ctx, operation: AclOperation, resource_type: ResourceType, names) -> None:
    logger.info("%s: %s denied %s on %s %s", ctx.peer, ctx.principal, operation.name, resource_type.name,
                ", ".join(sorted(names)))


def denied(ctx, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True) -> bool:
    """Whether the authorizer refuses the principal ``operation`` on the named resource (False
    without an authorizer)."""
    if ctx.allowed(operation, resource_type, name):
        return False
    if log:
        log_denied(ctx, operation, resource_type, (name,))
    return True


def unauthorized(ctx, operation: AclOperation, resource_type: ResourceType, names: Iterable[str], *,
                 log: bool = True) -> set[str]:
    """The ``names`` the principal may not ``operation`` (none without an authorizer)."""
    names = set(names)
    refused = names - ctx.authorized(operation, resource_type, names)
    if refused and log:
        log_denied(ctx, operation, resource_type, refused)
    return refused


def on_cluster(ctx, operation: AclOperation, *, log: bool = False) -> bool:
    """Whether ``operation`` on the cluster is allowed (a check that lets a topic check pass)."""
    return not denied(ctx, operation, R.CLUSTER, CLUSTER_NAME, log=log)


def operations(ctx, resource_type: ResourceType, name: str) -> int:
    """Kafka's ``authorizedOperations``: the bit field of the supported operations allowed on
    the resource; all of them without an authorizer.  Never logs."""
    if not ctx.broker.acls.enabled:
        return _ALL_OPERATIONS[resource_type]
    return ctx.broker.acls.authorizer.authorized_operations(ctx.principal, ctx.host, resource_type, name)


def cluster_operations(ctx) -> int:
    """``cluster_authorized_operations`` (Metadata v8-10, DescribeCluster): 0 unless DESCRIBE on
    the cluster is allowed (a denial Kafka logs), then ``operations`` on the cluster."""
    if ctx.broker.acls.enabled and denied(ctx, Op.DESCRIBE, R.CLUSTER, CLUSTER_NAME):
        return 0
    return operations(ctx, R.CLUSTER, CLUSTER_NAME)


def bits(field: int) -> list[int]:
    """A bit field as kwire's codec takes a ``BitField`` (Metadata, DescribeCluster): the bit
    numbers set.  (DescribeTopicPartitions' field is a plain int32.)"""
    return [bit for bit in range(31) if field >> bit & 1]


# -- config resources (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) ----------------
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 8, 16, 32
_CONFIG_RESOURCES = {
    TOPIC_RESOURCE: (R.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    BROKER_RESOURCE: (R.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    BROKER_LOGGER_RESOURCE: (R.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    CLIENT_METRICS_RESOURCE: (R.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    GROUP_RESOURCE: (R.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}
# Kafka's default message of each error (``Errors.X.message``), which DescribeConfigs answers
DEFAULT_MESSAGES = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
}


def config_resource_denied(ctx, operation: AclOperation, resource_type: int, name: str) -> ErrorCode | None:
    """The error a config resource answers when ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS)
    on it is refused: broker, broker logger and client metrics resources are checked on the
    cluster, topics and groups by name.  None when allowed, and for a resource type Kafka
    rejects as invalid (the handler answers it)."""
    found = _CONFIG_RESOURCES.get(resource_type)
    if found is None:
        return None
    acl_type, error = found
    return error if denied(ctx, operation, acl_type, CLUSTER_NAME if acl_type is R.CLUSTER else name) else None
