"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""
from __future__ import annotations

import logging

from kwire.admin.describe import describe_topic
from kwire.admin.topic_config import validate_topic_configs
from kwire.admin.topics import INTERNAL_TOPICS, validate_topic_name
from kwire.codecs.errors import ErrorCode, KafkaApiError

from .. import blocking
from ..registry import handles

logger = logging.getLogger("kwire.topics")


def check_replication(ctx, replication_factor: int, assignments) -> None:
    """Single node: replication factor 1 (or -1 = default), replicas only on this node."""
    if replication_factor not in (-1, 1):
        raise KafkaApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                            f"Unable to replicate the partition {replication_factor} time(s): "
                            "The target replication factor of "
                            f"{replication_factor} cannot be reached because only 1 broker(s) are registered.")
    for a in assignments or ():
        if list(a.broker_ids) != [ctx.broker.node_id]:
            raise KafkaApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"replica assignment {list(a.broker_ids)} names brokers other than "
                                f"node {ctx.broker.node_id}")


def plan_topic(ctx, t) -> tuple[int, dict[str, str]]:
    """Validate one CreatableTopic; returns (partitions, configs) or raises KafkaApiError."""
    validate_topic_name(t.name)
    if ctx.broker.logs.get(t.name) is not None:
        raise KafkaApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
    if t.assignments and t.num_partitions != -1:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                            "Both numPartitions or replicationFactor and replicasAssignments were set.")
    partitions = len(t.assignments) if t.assignments else t.num_partitions
    if partitions == -1:
        partitions = ctx.broker.config.num_partitions
    if partitions <= 0:
        raise KafkaApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    check_replication(ctx, t.replication_factor, t.assignments)
    configs = validate_topic_configs({c.name: c.value for c in t.configs or ()})
    return partitions, configs


def created_entry(ctx, name, topic_id, partitions, configs) -> dict:
    entries = describe_topic(ctx.broker.config, configs, None, False, False)
    return {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None,
            "num_partitions": partitions, "replication_factor": 1,
            "configs": [{"name": e.name, "value": e.value, "read_only": e.read_only,
                         "config_source": e.source, "is_sensitive": e.is_sensitive} for e in entries]}


@handles(19, 2, 7)
async def handle_create_topics(ctx, request):
    results = []
    for t in request.topics:
        try:
            partitions, configs = plan_topic(ctx, t)
            topic_id = None
            if not request.validate_only:
                topic = await blocking.create_topic(ctx.broker.logs, t.name, partitions, configs,
                                                    now_ms=ctx.broker.clock.now_ms())
                topic_id = topic.topic_id
                logger.info("created topic %s (%d partitions, configs %s)", t.name, partitions, configs)
            results.append(created_entry(ctx, t.name, topic_id, partitions, configs))
        except KafkaApiError as exc:
            results.append({"name": t.name, "topic_id": None, "error_code": int(exc.code),
                            "error_message": exc.message, "num_partitions": -1,
                            "replication_factor": -1, "configs": None})
    return {"throttle_time_ms": 0, "topics": results}


def delete_one(ctx, name, topic_id) -> dict:
    logs = ctx.broker.logs
    if name is None and topic_id is not None:
        topic = logs.topics_by_id.get(topic_id)
        if topic is None:
            return {"name": None, "topic_id": topic_id, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
                    "error_message": None}
        name = topic.name
    try:
        if not ctx.broker.config.delete_topic_enable:
            raise KafkaApiError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        if name in INTERNAL_TOPICS:
            raise KafkaApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"{name} is an internal topic")
        topic = logs.delete_topic(name)
        logger.info("deleted topic %s", name)
        return {"name": name, "topic_id": topic.topic_id, "error_code": 0, "error_message": None}
    except KafkaApiError as exc:
        return {"name": name, "topic_id": topic_id, "error_code": int(exc.code), "error_message": exc.message}


@handles(20, 1, 6)
async def handle_delete_topics(ctx, request):
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    async with blocking.admin_lock(ctx.broker.logs):  # not while a topic's files are being written
        responses = [delete_one(ctx, n, i) for n, i in wanted]
    return {"throttle_time_ms": 0, "responses": responses}


async def grow_one(ctx, t, validate_only: bool) -> dict:
    try:
        topic = ctx.broker.logs.get(t.name)
        if topic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist.")
        current = len(topic.partitions)
        if t.count <= current:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS,
                                f"Topic currently has {current} partitions, which is higher than or "
                                f"equal to the requested {t.count}.")
        check_replication(ctx, 1, t.assignments)
        if not validate_only:
            await blocking.add_partitions(ctx.broker.logs, t.name, t.count, now_ms=ctx.broker.clock.now_ms())
        return {"name": t.name, "error_code": 0, "error_message": None}
    except KafkaApiError as exc:
        return {"name": t.name, "error_code": int(exc.code), "error_message": exc.message}


@handles(37, 0, 3)
async def handle_create_partitions(ctx, request):
    return {"throttle_time_ms": 0,
            "results": [await grow_one(ctx, t, request.validate_only) for t in request.topics]}
