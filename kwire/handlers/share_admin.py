"""DescribeShareGroupOffsets (90, v0-1): where each share-partition of a share group starts,
and (v1, KIP-1226) its lag.

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

from kwire.codecs.errors import ErrorCode
from kwire.groups.share_partition import share_lag

from ..registry import handles
from ..share_service import enabled
from .authz_groups import DESCRIBE, GROUP, TOPIC, acls_on, denied, unauthorized

UNKNOWN = -1


def _is_share_group(shares, group_id: str) -> bool:
    return shares.coordinator.describe(group_id) is not None or bool(shares.coordinator.start_offsets(group_id))


def _partition(index: int, error: ErrorCode = ErrorCode.NONE, start: int = UNKNOWN, epoch: int = UNKNOWN,
               lag: int = UNKNOWN) -> dict:
    return {"partition_index": index, "start_offset": start, "leader_epoch": epoch, "lag": lag,
            "error_code": int(error), "error_message": None}


def _describe_topic(ctx, name: str, partitions, states: dict, refused: set) -> dict:
    topic = ctx.broker.logs.get(name)
    topic_id = topic.topic_id if topic is not None else None
    entries = []
    for index in partitions:
        if name in refused:
            entries.append(_partition(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif topic is None or not 0 <= index < len(topic.partitions):
            entries.append(_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif (topic_id, index) not in states:
            entries.append(_partition(index))               # not read by the group yet
        else:
            plog = topic.partitions[index]
            sp = states[(topic_id, index)]
            entries.append(_partition(index, start=sp.spso, epoch=max(plog.leader_epoch, 0),
                                      lag=share_lag(sp, plog.high_watermark)))
    return {"topic_name": name, "topic_id": topic_id, "partitions": entries}


def _describe_group(ctx, group) -> dict:
    shares = ctx.broker.shares
    if denied(ctx, DESCRIBE, GROUP, group.group_id):
        return {"group_id": group.group_id, "topics": [],
                "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "error_message": None}
    if not _is_share_group(shares, group.group_id):
        return {"group_id": group.group_id, "topics": [], "error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                "error_message": f"Group {group.group_id} is not a share group."}
    states = shares.coordinator.start_offsets(group.group_id)
    if group.topics is None:                         # every share-partition the group has
        by_name: dict[str, list[int]] = {}
        for topic_id, index in sorted(states, key=lambda k: (str(k[0]), k[1])):
            topic = ctx.broker.logs.topics_by_id.get(topic_id)
            if topic is not None:
                by_name.setdefault(topic.name, []).append(index)
        wanted = sorted(by_name.items())
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in group.topics]
    refused = set(unauthorized(ctx, DESCRIBE, TOPIC, [name for name, _ in wanted])) if acls_on(ctx) else set()
    return {"group_id": group.group_id, "error_code": 0, "error_message": None,
            "topics": [_describe_topic(ctx, name, parts, states, refused) for name, parts in wanted]}


@handles(90, 0, 1, enabled=enabled)
async def handle_describe_share_group_offsets(ctx, request):
    return {"throttle_time_ms": 0, "groups": [_describe_group(ctx, g) for g in request.groups or ()]}
