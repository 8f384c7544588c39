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
    if ctx.broker.cluster is not None:
        return cluster_partition_entries(ctx.broker.cluster.snapshot, topic)
    node = ctx.broker.node_id
    return [{"error_code": 0, "partition_index": i, "leader_id": node,
             "leader_epoch": plog.leader_epoch, "replica_nodes": [node], "isr_nodes": [node],
             "offline_replicas": []} if not plog.offline else offline_entry(i, plog, node)
            for i, plog in enumerate(topic.partitions)]


def cluster_partition_entries(snap, topic) -> list[dict]:
    """Leader, epoch, replicas, ISR and offline replicas as ZooKeeper says (kwire.cluster_node).

    A leader that is not among the live brokers (its session expired and the controller has
    not elected another yet) is answered as Kafka's metadata cache does: LEADER_NOT_AVAILABLE
    with no leader id, never an id missing from the response's broker list (kafka-python's
    producer thread fails on every send to such a node until its next metadata)."""
    meta = snap.topics.get(topic.name) if snap else None
    entries = []
    for i in range(len(topic.partitions)):
        replicas = list(meta.assignment.get(i, ())) if meta else []
        state = snap.states.get((topic.name, i)) if snap else None
        offline = [r for r in replicas if r not in snap.brokers] if snap else []
        if state is None or state.leader < 0 or state.leader not in snap.brokers:
            entries.append({"error_code": int(ErrorCode.LEADER_NOT_AVAILABLE), "partition_index": i,
                            "leader_id": -1, "leader_epoch": state.leader_epoch if state else -1,
                            "replica_nodes": replicas, "isr_nodes": list(state.isr) if state else [],
                            "offline_replicas": offline})
            continue
        entries.append({"error_code": 0, "partition_index": i, "leader_id": state.leader,
                        "leader_epoch": state.leader_epoch, "replica_nodes": replicas,
                        "isr_nodes": list(state.isr), "offline_replicas": offline})
    return entries


def broker_entries(ctx) -> tuple[list[dict], int]:
    """(live brokers, controller id): this node alone, or the cluster's live brokers."""
    cluster = ctx.broker.cluster
    if cluster is None or cluster.snapshot is None:
        ep = ctx.broker.advertised
        return [{"node_id": ctx.broker.node_id, "host": ep.host, "port": ep.port, "rack": None}], \
            ctx.broker.node_id
    snap = cluster.snapshot
    return [{"node_id": i, "host": b.host, "port": b.port, "rack": b.rack}
            for i, b in sorted(snap.brokers.items())], snap.controller_id


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
        if ctx.broker.cluster is not None:
            await ctx.broker.cluster.create_topic(name, ctx.broker.config.num_partitions,
                                                  ctx.broker.config.default_replication_factor, {},
                                                  wait_s=2.0)
            topic = logs.get(name)
            if topic is None:
                return error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE)
        else:
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
    brokers, controller_id = broker_entries(ctx)
    return {"throttle_time_ms": 0, "brokers": brokers,
            "cluster_id": ctx.broker.cluster_id, "controller_id": controller_id,
            "topics": topics, "authorized_operations": NO_OPS, "error_code": 0}
