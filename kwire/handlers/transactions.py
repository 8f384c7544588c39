"""AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28).

The transaction coordinator runs in ``kwire.txn_service`` (single node only: a
broker in a ZooKeeper cluster answers COORDINATOR_NOT_AVAILABLE, as its
FindCoordinator does for transactional ids).  Versions are those before
KIP-890's transactions v2 (AddPartitionsToTxn 0-3, EndTxn and TxnOffsetCommit
0-4), which kwire does not implement.  InitProducerId is in ``producer_id``.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode
from kwire.groups import OffsetCommit
from kwire.groups.txn_coordinator import error_for_version

from ..registry import handles

NOT_HERE = ErrorCode.COORDINATOR_NOT_AVAILABLE


def answer(ctx, error: ErrorCode) -> int:
    return int(error_for_version(error, ctx.api_key, ctx.api_version))


@handles(24, 0, 3)
async def handle_add_partitions_to_txn(ctx, request):
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if ctx.broker.logs.partition(*tp) is None}
    if ctx.broker.cluster is not None:
        errors = {tp: NOT_HERE for tp in wanted}
    elif unknown:
        # as Kafka: nothing is added; the unknown ones say so, the others OPERATION_NOT_ATTEMPTED
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}
    else:
        result = await ctx.broker.transactions.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, wanted)
        errors = {tp: result.error for tp in wanted}
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition,
                                               "partition_error_code": answer(ctx, error)})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]}


@handles(25, 0, 4)
async def handle_add_offsets_to_txn(ctx, request):
    if ctx.broker.cluster is not None:
        return {"throttle_time_ms": 0, "error_code": int(NOT_HERE)}
    result = await ctx.broker.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                       request.producer_epoch, request.group_id)
    return {"throttle_time_ms": 0, "error_code": answer(ctx, result.error)}


@handles(26, 0, 4)
async def handle_end_txn(ctx, request):
    if ctx.broker.cluster is not None:
        return {"throttle_time_ms": 0, "error_code": int(NOT_HERE)}
    result = await ctx.broker.transactions.end_txn(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, bool(request.committed))
    return {"throttle_time_ms": 0, "error_code": answer(ctx, result.error)}


@handles(28, 0, 4)
async def handle_txn_offset_commit(ctx, request):
    offsets = [OffsetCommit(t.name, p.partition_index, p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in request.topics for p in t.partitions]
    if ctx.broker.cluster is not None:
        errors = [NOT_HERE] * len(offsets)
    else:
        groups = ctx.broker.groups
        await groups.offsets_topic()
        errors = await groups.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "generation_id", -1), getattr(request, "member_id", "") or "",
            getattr(request, "group_instance_id", None), offsets)
    by_topic: dict[str, list] = {}
    for commit, error in zip(offsets, errors):
        by_topic.setdefault(commit.topic, []).append({"partition_index": commit.partition,
                                                      "error_code": int(error)})
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
