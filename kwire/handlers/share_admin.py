"""DescribeShareGroupOffsets (90, v0-1): where each share-partition of a share group starts,
and (v1, KIP-1226) its lag; AlterShareGroupOffsets (91, v0) and DeleteShareGroupOffsets (92, v0):
set where they start, or delete their state (``kafka-share-groups.sh --reset-offsets`` /
``--delete-offsets``, ``Admin.alterShareGroupOffsets`` / ``deleteShareGroupOffsets``).

Where each share-partition's state is read from is the share service's (``ShareStates``):
on a single node the share-partitions are this broker's.  In a cluster the request goes to
the group's coordinator (NOT_COORDINATOR elsewhere), which reads each share-partition's
persisted state from its share coordinator without a leader epoch (so no leader is fenced;
Kafka uses ReadShareGroupStateSummary for this), and counts the lag against its own replica's
high watermark: on a follower that trails the leader's by up to a fetch
(``replica.fetch.wait.max.ms``), so a lag just after a produce may read low for that long.

The start offset is the share-partition start offset (SPSO): every record below it is
delivery-complete (acknowledged or archived).  The lag counts the records from the SPSO up
to the high watermark that are not delivery-complete yet.  A partition the group has not
read yet answers start offset -1 (and lag -1), as Kafka does; ``topics`` null asks for
every share-partition the group has.  An id that is not a share group answers
GROUP_ID_NOT_FOUND for the group.

ACLs, as Kafka's KafkaApis: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for that
group), DESCRIBE on each topic (else TOPIC_AUTHORIZATION_FAILED on its partitions).

Alter and Delete act only on an empty share group, as Kafka: the request's error is
NOT_COORDINATOR off the group's coordinator, GROUP_ID_NOT_FOUND for an id that is no share
group, NON_EMPTY_GROUP while it has members.  Alter sets each partition's share-partition start
offset, the next record delivered, and forgets what was in flight (delivery counts too); Delete
removes the share-partitions' state of each topic, so their next fetch initializes them again
from share.auto.offset.reset.  Either writes the next state epoch, so a share-partition leader
still holding the old state is fenced (FENCED_STATE_EPOCH) and loads the new one.  Errors are
per partition (Alter) or per topic (Delete): UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED,
INVALID_REQUEST for a negative start offset, or the persister's.  ACLs, as Kafka's KafkaApis:
READ (Alter) or DELETE (Delete) on the group for the request, READ on each topic.
"""
from __future__ import annotations

from kwire.admin.features import SHARE_VERSION
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.services.shares import enabled
from kwire.handlers.authz_groups import DELETE, DESCRIBE, GROUP, READ, TOPIC, acls_on, denied, unauthorized

UNKNOWN = -1


def _is_share_group(shares, group_id: str) -> bool:
    return shares.coordinator.describe(group_id) is not None or bool(shares.coordinator.start_offsets(group_id))


def _partition(index: int, error: ErrorCode = ErrorCode.NONE, start: int = UNKNOWN, epoch: int = UNKNOWN,
               lag: int = UNKNOWN) -> dict:
    return {"partition_index": index, "start_offset": start, "leader_epoch": epoch, "lag": lag,
            "error_code": int(error), "error_message": None}


async def _describe_topic(ctx, group_id: str, name: str, partitions, refused: set) -> dict:
    topic = ctx.broker.logs.get(name)
    topic_id = topic.topic_id if topic is not None else None
    entries = []
    for index in partitions:
        if name in refused:
            entries.append(_partition(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif topic is None or not 0 <= index < len(topic.partitions):
            entries.append(_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            plog = topic.partitions[index]
            try:
                start, lag = await ctx.broker.shares.start_and_lag((group_id, topic_id, index), plog.high_watermark)
            except KafkaApiError as exc:
                entries.append(_partition(index, exc.code))
                continue
            known = start >= 0
            entries.append(_partition(index, start=start, epoch=max(plog.leader_epoch, 0) if known else UNKNOWN,
                                      lag=lag))
    return {"topic_name": name, "topic_id": topic_id, "partitions": entries}


def _share_partitions(ctx, group_id: str) -> dict[str, list[int]]:
    """topic name -> partitions of the group's share-partitions: those this broker holds and,
    in a cluster, those its members were assigned."""
    coordinator = ctx.broker.shares.coordinator
    keys = set(coordinator.start_offsets(group_id))
    group = coordinator.describe(group_id)
    if group is not None:
        keys |= set(group.assigned)
    by_name: dict[str, list[int]] = {}
    for topic_id, index in keys:
        topic = ctx.broker.logs.topics_by_id.get(topic_id)
        if topic is not None:
            by_name.setdefault(topic.name, []).append(index)
    return {name: sorted(parts) for name, parts in sorted(by_name.items())}


async def _describe_group(ctx, group) -> dict:
    shares = ctx.broker.shares
    error = {"group_id": group.group_id, "topics": [], "error_message": None}
    if denied(ctx, DESCRIBE, GROUP, group.group_id):
        return dict(error, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    try:
        ctx.broker.groups.check_owner(group.group_id)
    except KafkaApiError as exc:
        return dict(error, error_code=int(exc.code), error_message=exc.message)
    if not _is_share_group(shares, group.group_id):
        return dict(error, error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                    error_message=f"Group {group.group_id} is not a share group.")
    if group.topics is None:                         # every share-partition the group has
        wanted = list(_share_partitions(ctx, group.group_id).items())
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in group.topics]
    refused = set(unauthorized(ctx, DESCRIBE, TOPIC, [name for name, _ in wanted])) if acls_on(ctx) else set()
    return {"group_id": group.group_id, "error_code": 0, "error_message": None,
            "topics": [await _describe_topic(ctx, group.group_id, name, parts, refused) for name, parts in wanted]}


@handles(90, 0, 1, enabled=enabled, feature=SHARE_VERSION)
async def handle_describe_share_group_offsets(ctx, request):
    return {"throttle_time_ms": 0, "groups": [await _describe_group(ctx, g) for g in request.groups or ()]}


def _refused(ctx, names) -> set:
    return set(unauthorized(ctx, READ, TOPIC, list(names))) if acls_on(ctx) and names else set()


@handles(91, 0, 0, enabled=enabled, feature=SHARE_VERSION)
async def handle_alter_share_group_offsets(ctx, request):
    base = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": []}
    group_id = request.group_id or ""
    if not group_id:
        return dict(base, error_code=int(ErrorCode.INVALID_GROUP_ID))
    if denied(ctx, READ, GROUP, group_id):
        return dict(base, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    refused = _refused(ctx, {t.topic_name for t in request.topics or ()})
    starts, responses = {}, []
    for t in request.topics or ():
        topic = ctx.broker.logs.get(t.topic_name)
        entries = []
        for p in t.partitions:
            code = ErrorCode.NONE
            if t.topic_name in refused:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or not 0 <= p.partition_index < len(topic.partitions):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.start_offset < 0:
                code = ErrorCode.INVALID_REQUEST
            else:
                starts[(topic.topic_id, p.partition_index)] = p.start_offset
            entries.append({"partition_index": p.partition_index, "error_code": int(code), "error_message": None})
        responses.append({"topic_name": t.topic_name, "topic_id": topic.topic_id if topic is not None else None,
                          "partitions": entries})
    try:
        failed = await ctx.broker.shares.reset_offsets(group_id, starts)
    except KafkaApiError as exc:
        return dict(base, error_code=int(exc.code), error_message=exc.message)
    for r in responses:
        for e in r["partitions"]:
            if (r["topic_id"], e["partition_index"]) in failed:
                e["error_code"] = int(failed[(r["topic_id"], e["partition_index"])])
    return dict(base, responses=responses)


@handles(92, 0, 0, enabled=enabled, feature=SHARE_VERSION)
async def handle_delete_share_group_offsets(ctx, request):
    base = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": []}
    group_id = request.group_id or ""
    if not group_id:
        return dict(base, error_code=int(ErrorCode.INVALID_GROUP_ID))
    if denied(ctx, DELETE, GROUP, group_id):
        return dict(base, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
    refused = _refused(ctx, {t.topic_name for t in request.topics or ()})
    starts, responses = {}, []
    for t in request.topics or ():
        topic = ctx.broker.logs.get(t.topic_name)
        code = ErrorCode.NONE
        if t.topic_name in refused:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            starts.update(((topic.topic_id, p), None) for p in range(len(topic.partitions)))
        responses.append({"topic_name": t.topic_name, "topic_id": topic.topic_id if topic is not None else None,
                          "error_code": int(code), "error_message": None})
    try:
        failed = await ctx.broker.shares.reset_offsets(group_id, starts)
    except KafkaApiError as exc:
        return dict(base, error_code=int(exc.code), error_message=exc.message)
    for (topic_id, _partition), code in sorted(failed.items(), key=lambda kv: kv[0][1]):
        for r in responses:
            if r["topic_id"] == topic_id and not r["error_code"]:
                r["error_code"] = int(code)
    return dict(base, responses=responses)
