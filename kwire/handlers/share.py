"""Share groups (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79), at versions 0 (Kafka 4.0's early access: the Java 4.0 client's
KafkaShareConsumer) and 1 (Kafka 4.1+'s first stable version, what librdkafka sends); ShareFetch
and ShareAcknowledge also at 2 (Kafka 4.2).  They differ in who names a member (v0: the
coordinator, in Kafka's Uuid form, see ``new_member_id``; v1: the client) and in ShareFetch's
limits (v0: PartitionMaxBytes; v1: MaxRecords, BatchSize and the response's
AcquisitionLockTimeoutMs).  Version 2 adds ShareFetch's ShareAcquireMode (1, record-limit: never
more than MaxRecords records acquired, a batch taken in part) and, on both, IsRenewAck: the
acknowledgements may hold type 4, Renew, which keeps records acquired and restarts their
acquisition lock (a type 4 without IsRenewAck is INVALID_REQUEST for its partition).  A renewing
ShareFetch fetches nothing: its MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0
(INVALID_REQUEST otherwise).  ShareAcknowledge v2 answers the AcquisitionLockTimeoutMs.

Served by ``kwire.services.shares``; advertised only when ``group.share.enable`` is true and
``share`` is in ``group.coordinator.rebalance.protocols``; in cluster mode membership is
served by the group's coordinator (NOT_COORDINATOR elsewhere) and ShareFetch/ShareAcknowledge
of a partition by its leader (NOT_LEADER_OR_FOLLOWER elsewhere), see the service.  A group id a classic group already uses is refused (GROUP_ID_NOT_FOUND, as
Kafka answers a heartbeat for a group of another type).

ShareFetch: acknowledgements first (persisted before the answer), then each partition of
the share session is read from the first available record: whole batches from the log,
with the ``acquired_records`` ranges this member now holds.  With nothing acquired it
long-polls up to ``max_wait_ms`` (capped by ``fetch.max.wait.ms``) for new records or
released ones.  A closing request (epoch -1) only acknowledges, and releases the rest.
"""
from __future__ import annotations

import uuid

import trio

from kwire.admin.features import SHARE_VERSION
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.handlers.authz_groups import DESCRIBE, GROUP, READ, TOPIC, acls_on, denied, unauthorized
from kwire.services.shares import enabled

SHARE_ASSIGNOR = "simple"


def service(ctx):
    if not enabled(ctx.broker.config):
        raise KafkaApiError(ErrorCode.UNSUPPORTED_VERSION, "share groups are not enabled")
    return ctx.broker.shares


def _classic_group_exists(ctx, group_id: str) -> bool:
    """Read-only question to the classic coordinator: does it know ``group_id``?"""
    try:
        return ctx.broker.groups.describe(group_id).state != "Dead"
    except KafkaApiError:
        return False


@handles(76, 0, 1, enabled=enabled, feature=SHARE_VERSION)
async def handle_share_group_heartbeat(ctx, request):
    shares = service(ctx)
    base = {"throttle_time_ms": 0, "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0,
            "assignment": None}
    if not request.group_id:
        return dict(base, error_code=int(ErrorCode.INVALID_REQUEST), error_message="GroupId can't be empty.")
    if denied(ctx, READ, GROUP, request.group_id):
        return dict(base, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), error_message=None)
    if acls_on(ctx) and request.subscribed_topic_names and unauthorized(
            ctx, DESCRIBE, TOPIC, list(request.subscribed_topic_names)):
        return dict(base, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), error_message=None)
    try:
        ctx.broker.groups.check_owner(request.group_id)     # cluster mode: the group's coordinator only
    except KafkaApiError as exc:
        return dict(base, error_code=int(exc.code), error_message=exc.message)
    if _classic_group_exists(ctx, request.group_id):
        return dict(base, error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                    error_message=f"Group {request.group_id} is not a share group.")
    r = await shares.heartbeat(request.group_id, request.member_id, request.member_epoch, request.rack_id,
                               None if request.subscribed_topic_names is None
                               else list(request.subscribed_topic_names),
                               ctx.client_id or "", "/" + ctx.peer.rsplit(":", 1)[0])
    assignment = None
    if r.assignment is not None:
        assignment = {"topic_partitions": [{"topic_id": topic_id, "partitions": list(parts)}
                                           for topic_id, _name, parts in r.assignment]}
    return {"throttle_time_ms": 0, "error_code": int(r.error), "error_message": r.message,
            "member_id": r.member_id, "member_epoch": r.member_epoch,
            "heartbeat_interval_ms": r.heartbeat_interval_ms, "assignment": assignment}


@handles(77, 0, 1, enabled=enabled, feature=SHARE_VERSION)
async def handle_share_group_describe(ctx, request):
    shares = service(ctx)
    out = []
    for group_id in request.group_ids:
        group = shares.coordinator.describe(group_id)
        try:
            ctx.broker.groups.check_owner(group_id)
        except KafkaApiError as exc:
            out.append({"error_code": int(exc.code), "error_message": exc.message, "group_id": group_id,
                        "group_state": "", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "",
                        "members": [], "authorized_operations": -2147483648})
            continue
        if denied(ctx, DESCRIBE, GROUP, group_id):
            out.append({"error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED), "error_message": None,
                        "group_id": group_id, "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                        "assignor_name": "", "members": [], "authorized_operations": -2147483648})
        elif group is None:
            out.append({"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND), "error_message":
                        f"Group {group_id} not found.", "group_id": group_id, "group_state": "Dead",
                        "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
                        "authorized_operations": -2147483648})
            continue
        out.append({"error_code": 0, "error_message": None, "group_id": group_id, "group_state": group.state.value,
                    "group_epoch": group.epoch, "assignment_epoch": group.epoch, "assignor_name": SHARE_ASSIGNOR,
                    "members": [{"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.epoch,
                                 "client_id": m.client_id, "client_host": m.client_host,
                                 "subscribed_topic_names": list(m.subscribed),
                                 "assignment": {"topic_partitions": [
                                     {"topic_id": tid, "topic_name": name, "partitions": list(parts)}
                                     for tid, name, parts in m.assignment]}}
                                for m in group.members.values()],
                    "authorized_operations": -2147483648})
    return {"throttle_time_ms": 0, "groups": out}


RENEW = 4            # AcknowledgeType Renew (version 2+, with IsRenewAck)


def _acks(topics, renew: bool = False) -> tuple[dict, set]:
    """({(topic_id, partition): [(first, last, types), ...]} of a request's acknowledgement
    batches, the partitions refused for a Renew the request did not announce with ``renew``)."""
    acks, bad = {}, set()
    for t in topics or ():
        for p in t.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                       for b in p.acknowledgement_batches or ()]
            key = (_uuid(t.topic_id), p.partition_index)
            if not renew and any(RENEW in types for _f, _l, types in batches):
                bad.add(key)
            elif batches:
                acks[key] = batches
    return acks, bad


def _renew_ack(ctx, request) -> bool:
    return ctx.api_version >= 2 and bool(request.is_renew_ack)


def _uuid(value) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _leader(ctx, topic_id, partition) -> dict:
    topic = ctx.broker.logs.topics_by_id.get(topic_id)
    leader_id, leader_epoch = ctx.broker.topology.leader_of(topic, partition)   # the cluster's metadata now
    return {"leader_id": leader_id, "leader_epoch": leader_epoch}


def _invalid_v2_fetch(ctx, request) -> str | None:
    """Why a version 2 ShareFetch is INVALID_REQUEST, or None."""
    if ctx.api_version < 2:
        return None
    if request.share_acquire_mode not in (0, 1):
        return f"unknown ShareAcquireMode {request.share_acquire_mode}"
    if request.is_renew_ack and (request.max_wait_ms or request.min_bytes or request.max_bytes
                                 or request.max_records):
        return "a renewing ShareFetch has MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0"
    return None


@handles(78, 0, 2, enabled=enabled, feature=SHARE_VERSION)
async def handle_share_fetch(ctx, request):
    shares = service(ctx)
    base = {"throttle_time_ms": 0, "responses": [], "node_endpoints": [],
            "acquisition_lock_timeout_ms": shares.coordinator.limits(request.group_id or "").record_lock_duration_ms}
    requested = [(_uuid(t.topic_id), [p.partition_index for p in t.partitions]) for t in request.topics or ()]
    forgotten = [(_uuid(t.topic_id), list(t.partitions)) for t in request.forgotten_topics_data or ()]
    group_id, member_id, epoch = request.group_id or "", request.member_id or "", request.share_session_epoch
    # v0 has no MaxRecords (0 there would mean "acknowledge only"): fetch as with it unset
    max_records = request.max_records if ctx.api_version >= 1 else -1
    if denied(ctx, READ, GROUP, group_id):
        return dict(base, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), error_message=None)
    invalid = _invalid_v2_fetch(ctx, request)
    if invalid:
        return dict(base, error_code=int(ErrorCode.INVALID_REQUEST), error_message=invalid)
    record_limit = ctx.api_version >= 2 and request.share_acquire_mode == 1
    try:
        session = shares.check_session(group_id, member_id, epoch, requested, forgotten)
    except KafkaApiError as exc:
        return dict(base, error_code=int(exc.code), error_message=exc.message)
    refused = _refused_topics(ctx, session.partitions if session is not None else
                              {(tid, p) for tid, parts in requested for p in parts})
    acks, bad = _acks(request.topics, _renew_ack(ctx, request))
    acks = {k: v for k, v in acks.items() if k[0] not in refused}
    ack_errors = await shares.acknowledge(group_id, member_id, acks) if acks else {}
    ack_errors.update((k, ErrorCode.INVALID_REQUEST) for k in bad if k[0] not in refused)
    entries: dict[tuple, dict] = {}

    def entry(topic_id, partition) -> dict:
        key = (topic_id, partition)
        if key not in entries:
            entries[key] = {"partition_index": partition, "error_code": 0, "error_message": None,
                            "acknowledge_error_code": int(ack_errors.get(key, 0)),
                            "acknowledge_error_message": None, "current_leader": _leader(ctx, topic_id, partition),
                            "records": b"", "acquired_records": []}   # never null: librdkafka 2.16 rejects it
        return entries[key]
    for key in ack_errors:
        entry(*key)
    for topic_id, partition in sorted(k for k in (session.partitions if session is not None else ())
                                      if k[0] in refused):
        e = entry(topic_id, partition)
        e["error_code"] = e["acknowledge_error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if session is None:                      # closing: acknowledge only, release the rest
        await shares.release_member(group_id, member_id)
    elif max_records != 0 and not (refused and all(k[0] in refused for k in session.partitions)):
        max_wait = min(max(request.max_wait_ms, 0), ctx.broker.config.value_of("fetch.max.wait.ms"))
        deadline = trio.current_time() + max_wait / 1000
        while True:
            got = await _fetch_once(ctx, shares, group_id, member_id, session, request.max_bytes, max_records,
                                    entry, refused, record_limit)
            if got or trio.current_time() >= deadline or not shares.member_known(group_id, member_id):
                break
            names = [(ctx.broker.logs.topics_by_id[tid].name, p) for tid, p in session.partitions
                     if tid in ctx.broker.logs.topics_by_id]
            await shares.wait_available(ctx.broker, names, deadline)
    by_topic: dict = {}
    for (topic_id, _), e in entries.items():
        by_topic.setdefault(topic_id, []).append(e)
    return dict(base, error_code=0, error_message=None,
                responses=[{"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()])


def _refused_topics(ctx, partitions) -> set:
    """The topic ids of ``partitions`` the principal may not READ (with an authorizer)."""
    if not acls_on(ctx):
        return set()
    names = {}
    for topic_id, _ in partitions:
        topic = ctx.broker.logs.topics_by_id.get(topic_id)
        if topic is not None:
            names[topic.name] = topic_id
    return {names[n] for n in unauthorized(ctx, READ, TOPIC, list(names))}


async def _fetch_once(ctx, shares, group_id, member_id, session, max_bytes: int, max_records: int, entry,
                      refused=frozenset(), record_limit: bool = False) -> bool:
    budget = max_bytes if max_bytes > 0 else 0x7FFFFFFF
    max_records = max_records if max_records > 0 else 500
    got = False
    ordered = sorted(session.partitions, key=lambda k: (str(k[0]), k[1]))
    if ordered:                     # each fetch starts one partition further: none starves the rest
        session.rotation = (session.rotation + 1) % len(ordered)
        ordered = ordered[session.rotation:] + ordered[:session.rotation]
    for topic_id, partition in ordered:
        if topic_id in refused:
            continue
        try:
            data, ranges = await shares.acquire(group_id, member_id, topic_id, partition, budget, max_records,
                                                record_limit)
        except KafkaApiError as exc:
            e = entry(topic_id, partition)
            e["error_code"], e["error_message"] = int(exc.code), exc.message
            got = True
            continue
        if ranges:
            e = entry(topic_id, partition)
            e["records"] = data
            e["acquired_records"] = [{"first_offset": f, "last_offset": lst, "delivery_count": c}
                                     for f, lst, c in ranges]
            budget -= len(data)
            max_records -= sum(lst - f + 1 for f, lst, _ in ranges)
            got = True
            if budget <= 0 or max_records <= 0:
                break
    return got


@handles(79, 0, 2, enabled=enabled, feature=SHARE_VERSION)
async def handle_share_acknowledge(ctx, request):
    shares = service(ctx)
    group_id, member_id, epoch = request.group_id or "", request.member_id or "", request.share_session_epoch
    base = {"throttle_time_ms": 0, "responses": [], "node_endpoints": [],
            "acquisition_lock_timeout_ms": shares.coordinator.limits(group_id).record_lock_duration_ms}
    if denied(ctx, READ, GROUP, group_id):
        return dict(base, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED), error_message=None)
    if epoch == 0:
        return dict(base, error_code=int(ErrorCode.INVALID_SHARE_SESSION_EPOCH),
                    error_message="ShareAcknowledge cannot open a share session")
    try:
        session = shares.check_session(group_id, member_id, epoch, [], [])
    except KafkaApiError as exc:
        return dict(base, error_code=int(exc.code), error_message=exc.message)
    acks, bad = _acks(request.topics, _renew_ack(ctx, request))
    refused = _refused_topics(ctx, set(acks) | bad)
    errors = await shares.acknowledge(group_id, member_id, {k: v for k, v in acks.items() if k[0] not in refused})
    errors.update({k: ErrorCode.INVALID_REQUEST for k in bad})
    errors.update({k: ErrorCode.TOPIC_AUTHORIZATION_FAILED for k in set(acks) | bad if k[0] in refused})
    if session is None:
        await shares.release_member(group_id, member_id)
    by_topic: dict = {}
    for (topic_id, partition), code in errors.items():
        by_topic.setdefault(topic_id, []).append({
            "partition_index": partition, "error_code": int(code), "error_message": None,
            "current_leader": _leader(ctx, topic_id, partition)})
    return dict(base, error_code=0, error_message=None,
                responses=[{"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()])


# -- what the classic group APIs (kwire.handlers.groups) show of share groups ---------------------
def share_group_rows(ctx, states: list[str] | None, types) -> list[dict]:
    """ListGroups entries of the share groups (group_type and protocol_type "share")."""
    if not enabled(ctx.broker.config) or (types and "share" not in [t.lower() for t in types]):
        return []
    wanted = {s.lower() for s in states} if states else None
    return [{"group_id": g.group_id, "protocol_type": "share", "group_state": g.state.value, "group_type": "share"}
            for g in ctx.broker.shares.coordinator.list_groups() if wanted is None or g.state.value.lower() in wanted]


def is_share_group(ctx, group_id: str) -> bool:
    return enabled(ctx.broker.config) and ctx.broker.shares.coordinator.describe(group_id) is not None


def describe_share_group_classic(ctx, group_id: str) -> dict:
    """A DescribeGroups entry for a share group: its state, protocol type "share" and members
    (client id and host; no metadata or assignment bytes, which share groups do not have)."""
    group = ctx.broker.shares.coordinator.describe(group_id)
    return {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": group.state.value,
            "protocol_type": "share", "protocol_data": SHARE_ASSIGNOR,
            "members": [{"member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
                         "client_host": m.client_host, "member_metadata": b"", "member_assignment": b""}
                        for m in group.members.values()],
            "authorized_operations": None}
