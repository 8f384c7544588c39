"""Metadata (3): brokers, topics, partitions; auto-creates topics when allowed.
DescribeTopicPartitions (75): the same partition facts, paged with a cursor (KIP-966).

Topic ids are stable: created with the topic, kept in ``__kwire_topics/`` on a single
node and in the topic's znode in a cluster, and answered by Metadata v10+.

Brokers are answered with their endpoint of the listener the request came through
(``ctx.listener``), as Kafka's metadata cache does: a live broker that registered no
such listener is left out of the broker list, and a partition it leads answers
LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before) with no leader.

With an authorizer (Kafka's KafkaApis and DescribeTopicPartitionsRequestHandler): a topic
needs DESCRIBE.  An all-topics request leaves the others out; a listed one is answered
TOPIC_AUTHORIZATION_FAILED without saying whether it exists (no topic id; asked by id, no
name).  Auto-creating a topic also needs CREATE on the cluster or on the topic (refused:
TOPIC_AUTHORIZATION_FAILED).  ``*_authorized_operations`` are Kafka's bit fields, all
supported operations without an authorizer: Metadata v8+ reports them when asked, for the
topics it describes (the cluster's only up to v10, 0 without DESCRIBE on the cluster);
DescribeTopicPartitions always, for the topics it describes.
"""
from __future__ import annotations

import logging

from kwire.admin.acls import AclOperation, ResourceType
from kwire.admin.topics import INTERNAL_TOPICS, validate_topic_name
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.handlers import authz

logger = logging.getLogger("kwire.metadata")
ZERO_UUID = None  # kafka-python encodes None as the zero UUID
NO_OPS = None  # bitfield: None encodes as -2147483648 (not requested)


def topic_entry(ctx, topic) -> dict:
    return {"error_code": 0, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.internal, "partitions": ctx.broker.topology.partition_entries(ctx, topic),
            "authorized_operations": NO_OPS}


def error_entry(name, code: ErrorCode, topic_id=None, is_internal: bool = False) -> dict:
    return {"error_code": int(code), "name": name, "topic_id": topic_id, "is_internal": is_internal,
            "partitions": [], "authorized_operations": NO_OPS}


def may_create(ctx, name: str) -> bool:
    """Auto-creation's ACL: CREATE on the cluster (not logged when refused) or on the topic."""
    return authz.on_cluster(ctx, AclOperation.CREATE) or \
        not authz.denied(ctx, AclOperation.CREATE, ResourceType.TOPIC, name)


async def lookup_or_create(ctx, name: str, allow_create: bool) -> dict:
    """The entry of a topic the principal may DESCRIBE, auto-created when allowed."""
    logs = ctx.broker.logs
    topic = logs.get(name)
    if topic is not None:
        return topic_entry(ctx, topic)
    create = allow_create and ctx.broker.config.auto_create_topics_enable
    if create and ctx.broker.acls.enabled and not may_create(ctx, name):
        return error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, is_internal=name in INTERNAL_TOPICS)
    try:
        validate_topic_name(name)
    except KafkaApiError as exc:
        return error_entry(name, exc.code)
    if not create:
        return error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        topic = await ctx.broker.topic_admin.auto_create(name)      # kwire.services.topic_admin
        if topic is None:               # a cluster's topic without a leader here yet
            return error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE)
    except KafkaApiError as exc:
        return error_entry(name, exc.code)
    logger.info("auto-created topic %s with %d partition(s)", name, len(topic.partitions))
    return topic_entry(ctx, topic)


def all_topic_entries(ctx) -> list[dict]:
    """An all-topics request: every topic, less those the principal may not DESCRIBE (hidden,
    and not logged, as Kafka does)."""
    topics = ctx.broker.logs.topics
    if not ctx.broker.acls.enabled:
        return [topic_entry(ctx, t) for t in topics.values()]
    allowed = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
    return [topic_entry(ctx, t) for name, t in topics.items() if name in allowed]


async def listed_topic_entries(ctx, request, allow_create: bool) -> list[tuple[dict, bool]]:
    """The listed topics in request order, each with whether it was described (allowed
    DESCRIBE, and CREATE if it was to be created: Kafka reports its authorized operations)."""
    logs = ctx.broker.logs
    acls_on = ctx.broker.acls.enabled
    if acls_on:
        names = [req.name if req.name is not None else getattr(logs.topics_by_id.get(req.topic_id), "name", None)
                 for req in request.topics]
        denied = authz.unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (name for name in names if name is not None))
    topics = []
    for req in request.topics:
        if req.name is None:  # by topic id (v10+): Kafka holds topic ids not sensitive, names are
            topic = logs.topics_by_id.get(req.topic_id)
            if topic is None:
                topics.append((error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, req.topic_id), False))
            elif acls_on and topic.name in denied:
                topics.append((error_entry(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, req.topic_id), False))
            else:
                topics.append((topic_entry(ctx, topic), True))
        elif acls_on and req.name in denied:    # exists or not: not told
            topics.append((error_entry(req.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED), False))
        else:
            entry = await lookup_or_create(ctx, req.name, allow_create)
            topics.append((entry, entry["error_code"] != ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return topics


@handles(3, 0, 13)
async def handle_metadata(ctx, request):
    allow_create = request.allow_auto_topic_creation if ctx.api_version >= 4 else True
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        topics = all_topic_entries(ctx)
        described = topics
    else:
        listed = await listed_topic_entries(ctx, request, allow_create)
        topics = [entry for entry, _ in listed]
        described = [entry for entry, was_described in listed if was_described]
    if ctx.api_version >= 8 and request.include_topic_authorized_operations:
        for entry in described:
            entry["authorized_operations"] = authz.bits(authz.operations(ctx, ResourceType.TOPIC, entry["name"]))
    cluster_ops = NO_OPS
    if 8 <= ctx.api_version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = authz.bits(authz.cluster_operations(ctx))
    brokers, controller_id = ctx.broker.topology.broker_entries(ctx)
    return {"throttle_time_ms": 0, "brokers": brokers,
            "cluster_id": ctx.broker.cluster_id, "controller_id": controller_id,
            "topics": topics, "authorized_operations": cluster_ops, "error_code": 0}


def describe_topic_names(ctx, request) -> list[str]:
    """The topics a DescribeTopicPartitions request covers, sorted, from the cursor's topic on.

    Raises KafkaApiError(INVALID_REQUEST) for a cursor outside the listed topics or with a
    negative partition, as Kafka does."""
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    if request.topics:
        names = {t.name for t in request.topics if t.name >= first}
        if cursor is not None and cursor.topic_name not in names:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, "the cursor's topic must be among the topics")
    else:
        names = {name for name in ctx.broker.logs.topics if name >= first}
    if cursor is not None and cursor.partition_index < 0:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "the cursor's partition must not be negative")
    return sorted(names)


def unknown_topic_entry(name: str) -> dict:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaApiError as exc:
        code = exc.code
    return {"error_code": int(code), "name": name, "topic_id": None, "is_internal": False,
            "partitions": [], "topic_authorized_operations": -2147483648}


@handles(75, 0, 0)
async def handle_describe_topic_partitions(ctx, request):
    """At most ``response_partition_limit`` partitions (capped by max.request.partition.size.limit)
    in topic-name order, then ``next_cursor`` where the next page starts; topics refused DESCRIBE
    are passed over as the page fills, listed ones appended refused.  Topics are never
    auto-created; an unknown listed topic answers UNKNOWN_TOPIC_OR_PARTITION (all-topics
    listings just skip topics deleted meanwhile).  The ELR lists are empty, never null: the
    Java admin client reads them without a null check (KIP-966 ELR is not implemented)."""
    try:
        names = describe_topic_names(ctx, request)
    except KafkaApiError as exc:
        return {"throttle_time_ms": 0, "next_cursor": None,
                "topics": [dict(unknown_topic_entry(t.name), error_code=int(exc.code)) for t in request.topics]}
    limit = max(min(ctx.broker.config.value_of("max.request.partition.size.limit"),
                    request.response_partition_limit), 1)
    cursor = request.cursor
    remaining, topics, next_cursor = limit, [], None
    acls_on, refused = ctx.broker.acls.enabled, []
    for name in names:
        if acls_on and authz.denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log=bool(request.topics)):
            if request.topics:     # listed: refused without saying whether it exists; else hidden
                refused.append(dict(unknown_topic_entry(name), error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            continue
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = ctx.broker.logs.get(name)
        if topic is None:
            if request.topics:
                topics.append(unknown_topic_entry(name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(len(topic.partitions), start + remaining)
        topics.append({"error_code": 0, "name": name, "topic_id": topic.topic_id, "is_internal": topic.internal,
                       "partitions": [dict(p, eligible_leader_replicas=[], last_known_elr=[])
                                      for p in ctx.broker.topology.partition_entries(ctx, topic)[start:end]],
                       "topic_authorized_operations": -2147483648})
        if end < len(topic.partitions):
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= max(end - start, 0)
    for entry in topics:
        entry["topic_authorized_operations"] = authz.operations(ctx, ResourceType.TOPIC, entry["name"])
    return {"throttle_time_ms": 0, "topics": topics + refused, "next_cursor": next_cursor}
