"""AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27),
TxnOffsetCommit (28).

The transaction coordinator runs in ``kwire.txn_service``; WriteTxnMarkers is
what a coordinator in a ZooKeeper cluster sends the leaders of the partitions
of a decided transaction.  Versions are those before KIP-890's transactions v2
(AddPartitionsToTxn 0-3, EndTxn and TxnOffsetCommit 0-4, WriteTxnMarkers 1),
which kwire does not implement.  InitProducerId is in ``producer_id``.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups import OffsetCommit
from kwire.groups.txn_coordinator import error_for_version

from ..registry import handles



def answer(ctx, error: ErrorCode) -> int:
    return int(error_for_version(error, ctx.api_key, ctx.api_version))


@handles(24, 0, 3)
async def handle_add_partitions_to_txn(ctx, request):
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if ctx.broker.logs.partition(*tp) is None}
    if unknown:
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
    result = await ctx.broker.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                       request.producer_epoch, request.group_id)
    return {"throttle_time_ms": 0, "error_code": answer(ctx, result.error)}


@handles(26, 0, 4)
async def handle_end_txn(ctx, request):
    result = await ctx.broker.transactions.end_txn(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, bool(request.committed))
    return {"throttle_time_ms": 0, "error_code": answer(ctx, result.error)}


@handles(27, 1, 1)
async def handle_write_txn_markers(ctx, request):
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            parts = []
            for partition in topic.partition_indexes:
                code = await ctx.broker.transactions.write_marker_here(
                    topic.name, partition, marker.producer_id, marker.producer_epoch,
                    bool(marker.transaction_result), marker.coordinator_epoch)
                parts.append({"partition_index": partition, "error_code": int(code)})
            topics.append({"name": topic.name, "partitions": parts})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": results}


@handles(28, 0, 4)
async def handle_txn_offset_commit(ctx, request):
    offsets = [OffsetCommit(t.name, p.partition_index, p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in request.topics for p in t.partitions]
    groups = ctx.broker.groups
    await groups.offsets_topic()
    try:
        errors = await groups.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "generation_id", -1), getattr(request, "member_id", "") or "",
            getattr(request, "group_instance_id", None), offsets)
    except KafkaApiError as exc:            # NOT_COORDINATOR: the group is coordinated elsewhere
        errors = [exc.code] * len(offsets)
    by_topic: dict[str, list] = {}
    for commit, error in zip(offsets, errors):
        by_topic.setdefault(commit.topic, []).append({"partition_index": commit.partition,
                                                      "error_code": int(error)})
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
