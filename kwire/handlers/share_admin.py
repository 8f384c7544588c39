"""DescribeShareGroupOffsets (90, v0-1): where each share-partition of a share group starts,
and (v1, KIP-1226) its lag.

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
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.services.shares import enabled
from kwire.handlers.authz_groups import DESCRIBE, GROUP, TOPIC, acls_on, denied, unauthorized

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


@handles(90, 0, 1, enabled=enabled)
async def handle_describe_share_group_offsets(ctx, request):
    return {"throttle_time_ms": 0, "groups": [await _describe_group(ctx, g) for g in request.groups or ()]}
