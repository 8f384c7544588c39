"""InitProducerId (22): producer ids for idempotent producers; with a transactional id, the
transaction coordinator's (kwire.services.transactions: a new id, or the id's epoch bumped, fencing
the previous producer and aborting its open transaction).

ACLs, as Kafka's KafkaApis checks them: with a transactional id, WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the cluster or
WRITE on any topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.  A denial answers producer
id -1 and epoch -1, as Kafka's error response does."""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode
from kwire.groups.txn_coordinator import error_for_version

from kwire.handlers.registry import handles
from kwire.handlers.authz_groups import TRANSACTIONAL_ID, WRITE, denied, may_write_idempotently

MAX_STRING_BYTES = 2**15 - 1     # Kafka's parser refuses longer strings; __transaction_state keys are such


@handles(22, 0, 5)
async def handle_init_producer_id(ctx, request):
    if request.transactional_id is not None:
        if len(request.transactional_id.encode()) > MAX_STRING_BYTES:     # flexible versions can carry one
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REQUEST),
                    "producer_id": -1, "producer_epoch": -1}
        if denied(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                    "producer_id": -1, "producer_epoch": -1}
        result = await ctx.broker.transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms,
            getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1))
        return {"throttle_time_ms": 0, "error_code": int(error_for_version(result.error, 22, ctx.api_version)),
                "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}
    if not may_write_idempotently(ctx):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    # An idempotent producer asking to bump its epoch (v3+) gets a fresh id instead,
    # as Kafka does for producers without a transactional id.
    producer_id = await ctx.broker.topology.next_producer_id()    # cluster-wide blocks in a cluster
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
