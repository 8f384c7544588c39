"""DescribeCluster (60)."""
from __future__ import annotations

from ..registry import handles


def brokers(ctx) -> list[dict]:
    ep = ctx.broker.advertised
    return [{"node_id": ctx.broker.node_id, "host": ep.host, "port": ep.port, "rack": None}]


@handles(60, 0, 1)
async def handle_describe_cluster(ctx, request):
    ep = ctx.broker.advertised
    if request.endpoint_type not in (None, 1):  # 1 = brokers; 2 = controllers
        return {"error_code": 114, "error_message": "kwire serves only broker endpoints",
                "endpoint_type": request.endpoint_type, "cluster_id": ctx.broker.cluster_id,
                "controller_id": -1, "brokers": []}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": ctx.broker.cluster_id, "controller_id": ctx.broker.node_id,
            "brokers": [{"broker_id": ctx.broker.node_id, "host": ep.host, "port": ep.port, "rack": None}],
            "authorized_operations": None}
