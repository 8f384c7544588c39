"""DescribeCluster (60)."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from ..registry import handles


@handles(60, 0, 1)
async def handle_describe_cluster(ctx, request):
    ep = ctx.broker.advertised
    if request.endpoint_type not in (None, 1):  # 1 = brokers; 2 = controllers
        return {"error_code": int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                "error_message": "kwire serves only broker endpoints",
                "endpoint_type": request.endpoint_type, "cluster_id": ctx.broker.cluster_id,
                "controller_id": -1, "brokers": []}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": ctx.broker.cluster_id, "controller_id": ctx.broker.node_id,
            "brokers": [{"broker_id": ctx.broker.node_id, "host": ep.host, "port": ep.port, "rack": None}],
            "authorized_operations": None}
