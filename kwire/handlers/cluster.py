"""DescribeCluster (60).

No ACL is checked; asked for ``cluster_authorized_operations``, it answers Kafka's bit field of
the cluster operations allowed (0 without DESCRIBE on the cluster; all of them without an
authorizer).

v2 (KIP-1073) asks with ``include_fenced_brokers`` for fenced brokers too, each with ``is_fenced``.
A ZooKeeper broker is either registered (listed, unfenced) or unknown: there are none fenced to add."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from kwire.handlers.registry import handles
from kwire.handlers import authz
from kwire.handlers.metadata import NO_OPS


@handles(60, 0, 2)
async def handle_describe_cluster(ctx, request):
    if request.endpoint_type not in (None, 1):  # 1 = brokers; 2 = controllers
        return {"error_code": int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                "error_message": "kwire serves only broker endpoints",
                "endpoint_type": request.endpoint_type, "cluster_id": ctx.broker.cluster_id,
                "controller_id": -1, "brokers": []}
    brokers, controller_id = ctx.broker.topology.broker_entries(ctx)
    operations = authz.bits(authz.cluster_operations(ctx)) if request.include_cluster_authorized_operations \
        else NO_OPS
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": ctx.broker.cluster_id, "controller_id": controller_id,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                         "is_fenced": False}
                        for b in brokers],
            "authorized_operations": operations}
