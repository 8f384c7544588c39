"""KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Served only when ``group.coordinator.rebalance.protocols`` lists ``consumer`` (otherwise
neither advertised nor accepted).  Each maps wire fields to one call of the broker's
``GroupService`` (the sans-I/O rules are in ``kwire.groups.consumer_coordinator``).

ACLs as Kafka's KafkaApis (late 2024): ConsumerGroupHeartbeat needs READ on the group;
ConsumerGroupDescribe DESCRIBE per group (a denied group is GROUP_AUTHORIZATION_FAILED and
listed first), with include_authorized_operations the group's bit field of allowed
operations (all supported ones without an authorizer).
"""
from __future__ import annotations

import uuid

from kwire.admin.features import GROUP_VERSION
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.results import ConsumerHeartbeat

from kwire.handlers.registry import handles
from kwire.handlers import authz
from kwire.handlers.authz_groups import DESCRIBE, GROUP, READ, denied

GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
UNKNOWN_OPERATIONS = -2147483648
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1      # v1's MemberType (-1: unknown)


def consumer_protocol_enabled(config) -> bool:
    return "consumer" in config.value_of("group.coordinator.rebalance.protocols")


def _uuid(value) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


@handles(68, 0, 1, enabled=consumer_protocol_enabled, feature=GROUP_VERSION)
async def handle_consumer_group_heartbeat(ctx, request):
    if denied(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "error_message": None, "member_id": None,
                "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
    owned = request.topic_partitions
    names = request.subscribed_topic_names
    r = await ctx.broker.groups.consumer_heartbeat(ConsumerHeartbeat(
        group_id=request.group_id, member_id=request.member_id or "", member_epoch=request.member_epoch,
        instance_id=request.instance_id, rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=None if owned is None else tuple((_uuid(tp.topic_id), tuple(tp.partitions)) for tp in owned),
        client_id=ctx.client_id or "", client_host=ctx.peer.rsplit(":", 1)[0]))
    assignment = None if r.assignment is None else {"topic_partitions": [
        {"topic_id": tid, "partitions": sorted(ps)} for tid, ps in sorted(r.assignment.items(), key=str)]}
    return {"throttle_time_ms": 0, "error_code": int(r.error), "error_message": r.message, "member_id": r.member_id,
            "member_epoch": r.member_epoch, "heartbeat_interval_ms": r.heartbeat_interval_ms,
            "assignment": assignment}


def _assignment(a: dict, names: dict) -> dict:
    return {"topic_partitions": [{"topic_id": tid, "topic_name": names.get(tid, ""), "partitions": sorted(ps)}
                                 for tid, ps in sorted(a.items(), key=str)]}


def _described(ctx, group_id: str, with_operations: bool) -> dict:
    empty = {"group_id": group_id, "group_state": "", "group_epoch": 0, "assignment_epoch": 0,
             "assignor_name": "", "members": [], "authorized_operations": UNKNOWN_OPERATIONS}
    try:
        d = ctx.broker.groups.consumer_describe(group_id)
    except KafkaApiError as e:
        return dict(empty, error_code=int(e.code), error_message=e.message)
    if d.error is not ErrorCode.NONE:
        return dict(empty, error_code=int(d.error), error_message=d.message)
    names = {t.topic_id: name for name, t in ctx.broker.logs.topics.items()}
    return {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": d.state,
            "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch, "assignor_name": d.assignor_name,
            "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                         "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                         "subscribed_topic_names": list(m.subscribed_topic_names),
                         "subscribed_topic_regex": m.subscribed_topic_regex,
                         "assignment": _assignment(m.assignment, names),
                         "target_assignment": _assignment(m.target_assignment, names),
                         "member_type": MEMBER_TYPE_CLASSIC if m.classic else MEMBER_TYPE_CONSUMER}
                        for m in d.members],
            "authorized_operations": authz.operations(ctx, GROUP, group_id) if with_operations
            else UNKNOWN_OPERATIONS}


@handles(69, 0, 1, enabled=consumer_protocol_enabled, feature=GROUP_VERSION)
async def handle_consumer_group_describe(ctx, request):
    denied_groups = [g for g in request.group_ids if denied(ctx, DESCRIBE, GROUP, g)]
    refused = [{"error_code": GROUP_DENIED, "error_message": None, "group_id": g, "group_state": "",
                "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                "authorized_operations": UNKNOWN_OPERATIONS} for g in denied_groups]
    return {"throttle_time_ms": 0, "groups": refused + [
        _described(ctx, g, bool(request.include_authorized_operations)) for g in request.group_ids
        if g not in denied_groups]}
