"""Resource-level ACL checks of the group and transaction APIs (``groups``, ``producer_id``,
``transactions``, ``txn_admin``), made as Kafka's KafkaApis makes them.

The checks themselves are listed in ``kwire.admin.acl_operations.API_ACLS``; the cluster-level
ones are made before dispatch (``kwire.server.connection``).  Each helper answers at once when no
authorizer is configured (``ctx.broker.acls.enabled`` is false), so the handlers' answers are
then exactly what they were without ACLs.

A denial that the client is told about is logged at INFO on ``kwire.acls`` (Kafka's authorizer
logs those); a hidden one (``log=False``: ListGroups, fetching all offsets, ListTransactions)
is not, as Kafka passes ``logIfDenied = false`` there.  Nothing here raises.
"""
from __future__ import annotations

from typing import Iterable

from kwire.admin.acls import CLUSTER_NAME, AclOperation, ResourceType

from kwire.handlers import authz

READ, WRITE, DESCRIBE, DELETE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DELETE
IDEMPOTENT_WRITE = AclOperation.IDEMPOTENT_WRITE
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


def acls_on(ctx) -> bool:
    return ctx.broker.acls.enabled


def denied(ctx, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True) -> bool:
    """Whether an authorizer is on and refuses the principal ``operation`` on the named resource."""
    return ctx.broker.acls.enabled and authz.denied(ctx, operation, resource_type, name, log=log)


def unauthorized(ctx, operation: AclOperation, resource_type: ResourceType, names: Iterable[str], *,
                 log: bool = True) -> set[str]:
    """The ``names`` the principal may not ``operation`` (none without an authorizer), each
    decided once."""
    if not ctx.broker.acls.enabled:
        return set()
    return authz.unauthorized(ctx, operation, resource_type, names, log=log)


def may_write_idempotently(ctx) -> bool:
    """InitProducerId without a transactional id (KIP-679): IDEMPOTENT_WRITE on the cluster, or
    WRITE on at least one topic (``Authorizer.authorize_by_resource_type``)."""
    acls = ctx.broker.acls
    if not acls.enabled or ctx.allowed(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME):
        return True
    if acls.authorizer.authorize_by_resource_type(ctx.principal, ctx.host, WRITE, TOPIC):
        return True
    authz.log_denied(ctx, IDEMPOTENT_WRITE, CLUSTER, [CLUSTER_NAME])
    return False


def authorized_operations(ctx, resource_type: ResourceType, name: str) -> list[int]:
    """An ``authorized_operations`` field as kwire's codec takes it (the bit numbers), from
    Kafka's bit field of the supported operations the principal is allowed."""
    bits = ctx.broker.acls.authorizer.authorized_operations(ctx.principal, ctx.host, resource_type, name)
    return [op for op in range(32) if bits >> op & 1]
