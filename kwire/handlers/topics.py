"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

With an authorizer (Kafka's KafkaApis), each topic is checked before anything else about it:
CreateTopics needs CREATE on the cluster or on the topic (refused: TOPIC_AUTHORIZATION_FAILED,
"Authorization failed."), and a created topic's configs, partition count and replication
factor are answered only with DESCRIBE_CONFIGS on it (else topic_config_error_code
TOPIC_AUTHORIZATION_FAILED).  DeleteTopics needs DELETE on each topic (after the
delete.topic.enable check); a topic named by id also needs DESCRIBE, else it is refused with
its name withheld.  CreatePartitions needs ALTER on each topic.
"""
from __future__ import annotations

from kwire.admin.acls import AclOperation, ResourceType
from kwire.admin.quotas import CONTROLLER_MUTATION_RATE, principal_user
from kwire.admin.describe import describe_topic
from kwire.admin.topic_config import validate_topic_configs
from kwire.admin.topics import validate_topic_name
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.handlers import authz
from kwire.schemas.validators import check_topic_configs


THROTTLED = "The throttling quota has been exceeded."


def mutation_quota(ctx, strict_since: int):
    """The controller_mutation_rate quota this request draws on (KIP-599), None when there is
    none: strict (a topic over the quota is refused THROTTLING_QUOTA_EXCEEDED) from
    ``strict_since``, older versions are only throttled."""
    quotas = ctx.broker.quotas
    if not quotas.active:
        return None
    return quotas.enforcer.mutation_quota(principal_user(ctx.principal), ctx.client_id or "",
                                          ctx.api_version >= strict_since, ctx.broker.clock.now_ms())


def mutation_throttle(ctx, quota) -> int:
    """The request's throttle from its mutation quota (the connection mutes for it)."""
    if quota is None or quota.throttle_ms <= 0:
        return 0
    ctx.broker.quotas.enforcer.throttled(CONTROLLER_MUTATION_RATE, principal_user(ctx.principal),
                                         ctx.client_id or "", quota.throttle_ms)
    ctx.throttle_ms = max(ctx.throttle_ms, quota.throttle_ms)
    return quota.throttle_ms


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
    ctx.broker.topic_admin.check_replication(t.replication_factor, t.assignments)
    configs = validate_topic_configs({c.name: c.value for c in t.configs or ()})
    check_topic_configs(ctx.broker.config, configs)      # kwire.record.validator: the allow-list
    return partitions, configs


def created_entry(ctx, name, topic_id, partitions, configs, replication_factor: int = 1) -> dict:
    entries = describe_topic(ctx.broker.config, configs, None, False, False)
    return {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None,
            "num_partitions": partitions, "replication_factor": replication_factor,
            "configs": [{"name": e.name, "value": e.value, "read_only": e.read_only,
                         "config_source": e.source, "is_sensitive": e.is_sensitive} for e in entries]}


def create_acls(ctx, request) -> tuple[set[str], set[str]]:
    """(topics refused CREATE, topics refused DESCRIBE_CONFIGS): CREATE on the cluster allows
    every topic; neither refusal of the cluster nor of DESCRIBE_CONFIGS is logged."""
    names = {t.name for t in request.topics}
    if authz.on_cluster(ctx, AclOperation.CREATE):
        refused = set()
    else:
        refused = authz.unauthorized(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    return refused, authz.unauthorized(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names, log=False)


def refused_creation(name: str, hide_configs: bool) -> dict:
    entry = {"name": name, "topic_id": None, "error_code": int(authz.TOPIC_DENIED),
             "error_message": "Authorization failed.", "num_partitions": -1, "replication_factor": -1,
             "configs": []}
    if hide_configs:
        entry["topic_config_error_code"] = int(authz.TOPIC_DENIED)
    return entry


def hide_configs(entry: dict) -> dict:
    """A created topic's entry without DESCRIBE_CONFIGS on it."""
    entry.update(num_partitions=-1, replication_factor=-1, configs=[],
                 topic_config_error_code=int(authz.TOPIC_DENIED))
    return entry


@handles(19, 2, 7)
async def handle_create_topics(ctx, request):
    results = []
    refused, undescribable = create_acls(ctx, request) if ctx.broker.acls.enabled else ((), ())
    quota = mutation_quota(ctx, 6)
    for t in request.topics:
        if t.name in refused:
            results.append(refused_creation(t.name, t.name in undescribable))
            continue
        try:
            partitions, configs = plan_topic(ctx, t)
            if quota is not None and not request.validate_only and not quota.record(partitions):
                raise KafkaApiError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            admin = ctx.broker.topic_admin      # kwire.services.topic_admin
            topic_id = await admin.create(t, partitions, configs, request.validate_only, request.timeout_ms)
            entry = created_entry(ctx, t.name, topic_id, partitions, configs, admin.replication_factor(t))
            results.append(hide_configs(entry) if t.name in undescribable else entry)
        except KafkaApiError as exc:
            results.append({"name": t.name, "topic_id": None, "error_code": int(exc.code),
                            "error_message": exc.message, "num_partitions": -1,
                            "replication_factor": -1, "configs": None})
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "topics": results}


def delete_refusals(ctx, wanted: list[tuple]) -> dict[int, dict]:
    """The answers of the topics (by position in ``wanted``) this principal may not delete:
    DESCRIBE is checked first for a topic named by id (refused: no name in the answer), then
    DELETE.  An unknown id is left to the deletion (UNKNOWN_TOPIC_ID), as is everything when
    delete.topic.enable is false (Kafka refuses the whole request before any ACL)."""
    if not ctx.broker.config.delete_topic_enable:
        return {}
    by_id = ctx.broker.logs.topics_by_id
    names = [name if topic_id is None or name is not None else getattr(by_id.get(topic_id), "name", None)
             for name, topic_id in wanted]
    known = [name for name in names if name is not None]
    hidden = authz.unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                [n for n, (given, _) in zip(names, wanted) if n is not None and given is None])
    undeletable = authz.unauthorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, known)
    refusals = {}
    for i, (name, (given, topic_id)) in enumerate(zip(names, wanted)):
        if name is None:
            continue
        if given is None and name in hidden:
            refusals[i] = {"name": None, "topic_id": topic_id, "error_code": int(authz.TOPIC_DENIED),
                           "error_message": None}
        elif name in undeletable:
            refusals[i] = {"name": name, "topic_id": topic_id, "error_code": int(authz.TOPIC_DENIED),
                           "error_message": None}
    return refusals


@handles(20, 1, 6)
async def handle_delete_topics(ctx, request):
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    refusals = delete_refusals(ctx, wanted) if ctx.broker.acls.enabled else {}
    quota = mutation_quota(ctx, 5) if ctx.broker.config.delete_topic_enable else None
    if quota is not None:
        logs = ctx.broker.logs
        for i, (name, topic_id) in enumerate(wanted):
            topic = logs.get(name) if name is not None else logs.topics_by_id.get(topic_id)
            if i in refusals or topic is None:
                continue
            if not quota.record(len(topic.partitions)):
                refusals[i] = {"name": name, "topic_id": topic_id,
                               "error_code": int(ErrorCode.THROTTLING_QUOTA_EXCEEDED), "error_message": THROTTLED}
    responses = await ctx.broker.topic_admin.delete(wanted, refusals, request.timeout_ms)
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "responses": responses}


async def grow_one(ctx, t, validate_only: bool, quota=None) -> dict:
    try:
        topic = ctx.broker.logs.get(t.name)
        if topic is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist.")
        current = len(topic.partitions)
        if t.count <= current:
            raise KafkaApiError(ErrorCode.INVALID_PARTITIONS,
                                f"Topic currently has {current} partitions, which is higher than or "
                                f"equal to the requested {t.count}.")
        admin = ctx.broker.topic_admin
        admin.check_replication(1, t.assignments)
        if quota is not None and not validate_only and not quota.record(t.count - current):
            raise KafkaApiError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
        if not validate_only:
            await admin.add_partitions(t.name, t.count, t.assignments)
        return {"name": t.name, "error_code": 0, "error_message": None}
    except KafkaApiError as exc:
        return {"name": t.name, "error_code": int(exc.code), "error_message": exc.message}


@handles(37, 0, 3)
async def handle_create_partitions(ctx, request):
    refused = ()
    if ctx.broker.acls.enabled:
        refused = authz.unauthorized(ctx, AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in request.topics))
    quota = mutation_quota(ctx, 3)
    results = [
        {"name": t.name, "error_code": int(authz.TOPIC_DENIED), "error_message": "The topic authorization is failed."}
        if t.name in refused else await grow_one(ctx, t, request.validate_only, quota) for t in request.topics]
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "results": results}
