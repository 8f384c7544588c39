"""InitProducerId (22): producer ids for idempotent producers (no transactions yet)."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode

from ..blocking import next_producer_id
from ..registry import handles


@handles(22, 0, 5)
async def handle_init_producer_id(ctx, request):
    if request.transactional_id is not None:
        return {"throttle_time_ms": 0,
                "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    # An idempotent producer asking to bump its epoch (v3+) gets a fresh id instead,
    # as Kafka does for producers without a transactional id.
    cluster = ctx.broker.cluster
    if cluster is not None:
        producer_id = await cluster.next_producer_id()
    else:
        producer_id = await next_producer_id(ctx.broker.logs)
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
