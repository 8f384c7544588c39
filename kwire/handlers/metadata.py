"""Metadata (3): brokers, topics, partitions; auto-creates topics when allowed."""
from __future__ import annotations

import logging

from kwire.admin.topics import validate_topic_name
from kwire.codecs.errors import ErrorCode, KafkaApiError

from .. import blocking
from ..registry import handles

logger = logging.getLogger("kwire.metadata")
ZERO_UUID = None  # kafka-python encodes None as the zero UUID
NO_OPS = None  # bitfield: None encodes as -2147483648 (not requested)


def partition_entries(ctx, topic) -> list[dict]:
    node = ctx.broker.node_id
    return [{"error_code": 0, "partition_index": i, "leader_id": node,
             "leader_epoch": plog.leader_epoch, "replica_nodes": [node], "isr_nodes": [node],
             "offline_replicas": []} if not plog.offline else offline_entry(i, plog, node)
            for i, plog in enumerate(topic.partitions)]


def offline_entry(index: int, plog, node: int) -> dict:
    """A partition whose storage failed (kwire.log.health): KAFKA_STORAGE_ERROR, its replica
    listed offline.  The leader stays named so that produce and fetch reach this broker and
    get KAFKA_STORAGE_ERROR instead of clients waiting silently for a leader."""
    return {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "partition_index": index,
            "leader_id": node, "leader_epoch": plog.leader_epoch, "replica_nodes": [node],
            "isr_nodes": [node], "offline_replicas": [node]}


def topic_entry(ctx, topic) -> dict:
    return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.internal, "partitions": partition_entries(ctx, topic),
            "authorized_operations": NO_OPS}


def error_entry(name, code: ErrorCode, topic_id=None) -> dict:
    return {"error_code": int(code), "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "authorized_operations": NO_OPS}


async def lookup_or_create(ctx, name: str, allow_create: bool) -> dict:
    logs = ctx.broker.logs
    topic = logs.get(name)
    if topic is not None:
        return topic_entry(ctx, topic)
    try:
        validate_topic_name(name)
    except KafkaApiError as exc:
        return error_entry(name, exc.code)
    if not (allow_create and ctx.broker.config.auto_create_topics_enable):
        return error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        topic = await blocking.create_topic(logs, name, ctx.broker.config.num_partitions, {},
                                            now_ms=ctx.broker.clock.now_ms(), exist_ok=True)
    except KafkaApiError as exc:
        return error_entry(name, exc.code)
    logger.info("auto-created topic %s with %d partition(s)", name, len(topic.partitions))
    return topic_entry(ctx, topic)


@handles(3, 0, 12)
async def handle_metadata(ctx, request):
    logs = ctx.broker.logs
    allow_create = request.allow_auto_topic_creation if ctx.api_version >= 4 else True
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        topics = [topic_entry(ctx, t) for t in logs.topics.values()]
    else:
        topics = []
        for req in request.topics:
            if req.name is None:  # by topic id (v10+)
                topic = logs.topics_by_id.get(req.topic_id)
                topics.append(topic_entry(ctx, topic) if topic else
                              error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, req.topic_id))
            else:
                topics.append(await lookup_or_create(ctx, req.name, allow_create))
    ep = ctx.broker.advertised
    return {"throttle_time_ms": 0,
            "brokers": [{"node_id": ctx.broker.node_id, "host": ep.host, "port": ep.port, "rack": None}],
            "cluster_id": ctx.broker.cluster_id, "controller_id": ctx.broker.node_id,
            "topics": topics, "authorized_operations": NO_OPS, "error_code": 0}
