"""DescribeCluster (60)."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from ..registry import handles
from .metadata import broker_entries


@handles(60, 0, 1)
async def handle_describe_cluster(ctx, request):
    if request.endpoint_type not in (None, 1):  # 1 = brokers; 2 = controllers
        return {"error_code": int(ErrorCode.MISMATCHED_ENDPOINT_TYPE),
                "error_message": "kwire serves only broker endpoints",
                "endpoint_type": request.endpoint_type, "cluster_id": ctx.broker.cluster_id,
                "controller_id": -1, "brokers": []}
    brokers, controller_id = broker_entries(ctx)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "endpoint_type": 1,
            "cluster_id": ctx.broker.cluster_id, "controller_id": controller_id,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                        for b in brokers],
            "authorized_operations": None}
