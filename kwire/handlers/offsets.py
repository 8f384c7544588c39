"""ListOffsets (2) and DeleteRecords (21).

ListOffsets v11 (KIP-1023) only adds the special timestamp -6, the earliest offset still to be
uploaded to tiered storage: with no tiered storage nothing is pending, so it answers -1/-1 like
-5 (latest tiered), at every version.

With an authorizer (Kafka's KafkaApis): ListOffsets needs DESCRIBE on each topic, DeleteRecords
DELETE; a refused topic's partitions answer TOPIC_AUTHORIZATION_FAILED (before the existence
check) and the others are answered as usual.
"""
from __future__ import annotations

import logging

import trio

from kwire.admin.acls import AclOperation, ResourceType
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.runtime.blocking import admin_lock, run_blocking
from kwire.handlers.registry import handles
from kwire.handlers import authz

logger = logging.getLogger("kwire.offsets")
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6


def lookup(plog, timestamp: int, read_committed: bool = False) -> tuple[int, int]:
    """(offset, timestamp) for a ListOffsets target; (-1, -1) when no record matches.
    Latest is the high watermark, or for read_committed the last stable offset."""
    if timestamp == LATEST:
        return (plog.last_stable_offset if read_committed else plog.high_watermark), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
        return (found[0], found[1]) if found else (-1, -1)
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):   # no tiered storage: nothing uploaded
        return -1, -1
    if timestamp < 0:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    found = plog.offset_for_timestamp(timestamp)
    return (found[0], found[1]) if found else (-1, -1)


def list_partition(ctx, topic_name: str, p, read_committed: bool = False) -> dict:
    entry = {"partition_index": p.partition_index, "error_code": 0, "old_style_offsets": [],
             "timestamp": -1, "offset": -1, "leader_epoch": -1}
    plog = ctx.broker.logs.partition(topic_name, p.partition_index)
    if plog is None:
        entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return entry
    try:
        plog.health.check_online()
        partitions = ctx.broker.partitions
        partitions.check_serving(topic_name, p.partition_index, plog, p.current_leader_epoch)
        partitions.check_caught_up(topic_name, p.partition_index, plog)   # a new leader's high watermark
        offset, timestamp = lookup(plog, p.timestamp, read_committed)
    except KafkaApiError as exc:
        entry["error_code"] = int(exc.code)
        return entry
    entry.update(offset=offset, timestamp=timestamp, leader_epoch=plog.leader_epoch)
    return entry


def refused_offsets(t) -> dict:
    return {"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": int(authz.TOPIC_DENIED), "old_style_offsets": [],
         "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]}


@handles(2, 1, 11)
async def handle_list_offsets(ctx, request):
    read_committed = getattr(request, "isolation_level", 0) == 1
    denied = None
    if ctx.broker.acls.enabled:
        denied = authz.unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = [refused_offsets(t) if denied and t.name in denied else
              {"name": t.name, "partitions": [list_partition(ctx, t.name, p, read_committed) for p in t.partitions]}
              for t in request.topics]
    return {"throttle_time_ms": 0, "topics": topics}


async def delete_partition(ctx, topic_name: str, p, timeout_ms: int) -> dict:
    """Checkpoint the new log start in a worker thread, then move it (on the Trio thread), so
    no reader sees records deleted that would come back after a crash.  In a cluster only the
    leader deletes, and answers once every live follower has moved its log start too (Kafka's
    low watermark), or REQUEST_TIMED_OUT after ``timeout_ms``.  Cancel-safe."""
    logs = ctx.broker.logs
    plog = logs.partition(topic_name, p.partition_index)
    if plog is None:
        return {"partition_index": p.partition_index, "low_watermark": -1,
                "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}
    partitions = ctx.broker.partitions
    tp = (topic_name, p.partition_index)
    try:
        leader = partitions.check_writer(topic_name, p.partition_index, plog)
        async with admin_lock(logs):  # one writer of the checkpoint file at a time
            target = plog.delete_records_target(p.offset)
            if target is not None:
                await run_blocking(plog.write_log_start_offset, target)
                if logs.partition(topic_name, p.partition_index) is not plog:  # deleted meanwhile
                    raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                plog.advance_log_start(target)
    except KafkaApiError as exc:
        return {"partition_index": p.partition_index, "low_watermark": -1, "error_code": int(exc.code)}
    except OSError:
        logger.exception("%s-%d: cannot checkpoint the log start offset", topic_name, p.partition_index)
        return {"partition_index": p.partition_index, "low_watermark": -1,
                "error_code": int(ErrorCode.KAFKA_STORAGE_ERROR)}
    if leader is None:
        return {"partition_index": p.partition_index, "low_watermark": plog.log_start_offset, "error_code": 0}
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    low_watermark, code = await partitions.wait_deleted(tp, leader, plog.log_start_offset, deadline)
    return {"partition_index": p.partition_index, "low_watermark": low_watermark, "error_code": int(code)}


@handles(21, 0, 2)
async def handle_delete_records(ctx, request):
    denied = None
    if ctx.broker.acls.enabled:
        denied = authz.unauthorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    topics = []
    for t in request.topics:
        if denied and t.name in denied:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "low_watermark": -1, "error_code": int(authz.TOPIC_DENIED)}
                for p in t.partitions]})
        else:
            topics.append({"name": t.name, "partitions": [await delete_partition(ctx, t.name, p, request.timeout_ms)
                                                          for p in t.partitions]})
    return {"throttle_time_ms": 0, "topics": topics}
