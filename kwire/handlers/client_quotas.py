"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (KIP-546): what
``kafka-configs.sh --entity-type users|clients`` and ``kwire quotas`` use.

The rules are kwire.admin.quotas's (Kafka's ClientQuotaControlManager and ClientQuotasImage);
the store is ``ctx.broker.quotas`` (kwire.services.quotas, or kwire.cluster.quota_store in a
cluster).  Describe: a bad filter answers a top-level error and no entries.  Alter: one result
per entry, each entity on its own; ``validate_only`` checks without writing.

ACLs (Kafka's KafkaApis): Describe needs DESCRIBE_CONFIGS on the cluster, Alter needs
ALTER_CONFIGS on the cluster; both are checked before dispatch (kwire.server.connection's
cluster gate): a refused Describe answers CLUSTER_AUTHORIZATION_FAILED at top level, a
refused Alter answers it for every entry (kwire.handlers.errors).
"""
from __future__ import annotations

from kwire.admin.quotas import Op, QuotaError, parse_filter
from kwire.services.quotas import Alteration

from kwire.handlers.registry import handles


def _entity_data(components) -> list[dict]:
    return [{"entity_type": t, "entity_name": n} for t, n in components]


@handles(48, 0, 1)
async def handle_describe_client_quotas(ctx, request):
    try:
        flt = parse_filter([(c.entity_type, c.match_type, c.match) for c in request.components or ()],
                           bool(request.strict))
    except QuotaError as exc:
        return {"throttle_time_ms": 0, "error_code": int(exc.code), "error_message": exc.message, "entries": None}
    entries = [{"entity": _entity_data(e),
                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())]}
               for e, values in ctx.broker.quotas.describe(flt)]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


@handles(49, 0, 1)
async def handle_alter_client_quotas(ctx, request):
    alterations = [Alteration([(c.entity_type, c.entity_name) for c in entry.entity or ()],
                              [Op(op.key, op.value, bool(op.remove)) for op in entry.ops or ()])
                   for entry in request.entries or ()]
    results = await ctx.broker.quotas.alter(alterations, bool(request.validate_only))
    return {"throttle_time_ms": 0, "entries": [
        {"error_code": code, "error_message": message, "entity": _entity_data(components)}
        for components, code, message in results]}
