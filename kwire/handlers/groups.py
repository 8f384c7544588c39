"""Consumer group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), OffsetCommit (8), OffsetFetch (9), DescribeGroups (15), ListGroups (16),
DeleteGroups (42), OffsetDelete (47).

Each handler maps wire fields to one call of the broker's ``GroupService``
(``kwire.services.groups``) and its result back to wire fields.  A JoinGroup or
SyncGroup that must wait parks in that call, so the connection's next request
is read only after it is answered (responses stay in order) while every other
connection goes on being served.

ACLs, as Kafka's KafkaApis checks them (``authz_groups``; nothing with no authorizer):

* FindCoordinator: DESCRIBE on the group or transactional id per key (key_type 0/1); v4+
  answers a denied key with GROUP/TRANSACTIONAL_ID_AUTHORIZATION_FAILED and goes on, below
  v4 the error is the whole answer.  Internal topics are created only for allowed keys.
* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else the whole request is
  GROUP_AUTHORIZATION_FAILED (SyncGroup v5+ without protocol type or name is
  INCONSISTENT_GROUP_PROTOCOL first, as Kafka).
* OffsetCommit: READ on the group (every partition GROUP_AUTHORIZATION_FAILED), then READ per
  topic (its partitions TOPIC_AUTHORIZATION_FAILED; the others are committed).
* OffsetFetch: DESCRIBE on each group (that group GROUP_AUTHORIZATION_FAILED), DESCRIBE per
  topic: a listed topic denied answers TOPIC_AUTHORIZATION_FAILED per partition (after the
  allowed ones), fetching all offsets leaves denied topics out.

OffsetCommit and OffsetFetch v10 (KIP-848) name topics by id instead of by name: an id no topic
has answers UNKNOWN_TOPIC_ID on each of its partitions (before any topic ACL, which needs a
name); fetching all offsets at v10 leaves out topics deleted since their commit (no id).
* DescribeGroups: DESCRIBE per group (denied groups first, as Kafka); v3+
  include_authorized_operations reports the group's allowed operations.
* ListGroups: DESCRIBE on the cluster lists every group, otherwise the groups allowed DESCRIBE.
* DeleteGroups: DELETE per group (distinct names; denied ones after the others).
* OffsetDelete: DELETE on the group (the whole request), then READ per topic.
"""
from __future__ import annotations

from types import SimpleNamespace

from kwire.admin.acls import CLUSTER_NAME
from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups import JoinRequest, OffsetCommit, SyncRequest

from kwire.handlers.registry import handles
from kwire.handlers import share
from kwire.handlers.authz_groups import (CLUSTER, DELETE, DESCRIBE, GROUP, READ, TOPIC, TRANSACTIONAL_ID, acls_on,
                           authorized_operations, denied, unauthorized)

GROUP_KEY, TRANSACTION_KEY = 0, 1
GROUP_DENIED, TOPIC_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED), int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def service(ctx):
    return ctx.broker.groups


def coordinator_entry(ctx, key: str, key_type: int) -> dict:
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                "error_message": f"no coordinator of key type {key_type}"}
    return ctx.broker.topology.coordinator_entry(ctx, key, key_type)   # kwire.services.topology


# FindCoordinator's check per key type, and the error's message as Kafka's Errors words it
KEY_ACLS = {GROUP_KEY: (GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
            TRANSACTION_KEY: (TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                              "Transactional Id authorization failed.")}


def refused_keys(ctx, keys, key_type: int) -> dict[str, tuple]:
    """FindCoordinator: the keys the principal may not DESCRIBE, each with its (error, message)."""
    check = KEY_ACLS.get(key_type)
    if check is None or not acls_on(ctx):
        return {}
    resource_type, error, message = check
    return {key: (error, message) for key in unauthorized(ctx, DESCRIBE, resource_type, keys)}


@handles(10, 0, 6)
async def handle_find_coordinator(ctx, request):
    key_type = getattr(request, "key_type", GROUP_KEY) or GROUP_KEY
    keys = list(request.coordinator_keys) if ctx.api_version >= 4 else [request.key]
    refused = refused_keys(ctx, keys, key_type)
    if not refused or len(refused) < len(set(keys)):      # as Kafka: no internal topic for denied keys
        try:
            if key_type == TRANSACTION_KEY:
                await ctx.broker.transactions.state_topic()
            else:
                await service(ctx).offsets_topic()
        except KafkaApiError:
            pass          # cluster mode: still being created; the entries say COORDINATOR_NOT_AVAILABLE
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [
            {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": int(refused[k][0]),
             "error_message": None} if k in refused else coordinator_entry(ctx, k, key_type) for k in keys]}
    if refused:
        error, message = refused[request.key]
        return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message,
                "node_id": -1, "host": "", "port": -1}
    entry = coordinator_entry(ctx, request.key, key_type)
    return {"throttle_time_ms": 0, "error_code": entry["error_code"], "error_message": entry["error_message"],
            "node_id": entry["node_id"], "host": entry["host"], "port": entry["port"]}


@handles(11, 0, 9)
async def handle_join_group(ctx, request):
    if denied(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "generation_id": -1, "protocol_type": None,
                "protocol_name": None if ctx.api_version >= 7 else "", "leader": "", "member_id": "",
                "members": []}
    if share.is_share_group(ctx, request.group_id):     # KIP-932: the id is a share group's
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), "generation_id": -1,
                "protocol_type": None, "protocol_name": None if ctx.api_version >= 7 else "", "leader": "",
                "member_id": request.member_id, "members": []}
    r = await service(ctx).join(JoinRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None), protocol_type=request.protocol_type,
        protocols=tuple((p.name, p.metadata) for p in request.protocols),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if ctx.api_version >= 1 else request.session_timeout_ms,
        client_id=ctx.client_id, client_host=ctx.peer.rsplit(":", 1)[0], api_version=ctx.api_version,
        reason=getattr(request, "reason", None)))
    # protocol_name is nullable only from v7 on
    protocol_name = r.protocol_name if r.protocol_name is not None or ctx.api_version >= 7 else ""
    return {"throttle_time_ms": 0, "error_code": int(r.error), "generation_id": r.generation_id,
            "protocol_type": r.protocol_type, "protocol_name": protocol_name, "leader": r.leader_id,
            "skip_assignment": r.skip_assignment, "member_id": r.member_id,
            "members": [{"member_id": m, "group_instance_id": i, "metadata": md} for m, i, md in r.members]}


@handles(14, 0, 5)
async def handle_sync_group(ctx, request):
    if acls_on(ctx):
        error = None
        if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL      # Kafka's check before the ACL's
        elif denied(ctx, READ, GROUP, request.group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if error is not None:
            return {"throttle_time_ms": 0, "error_code": int(error), "protocol_type": None, "protocol_name": None,
                    "assignment": b""}
    r = await service(ctx).sync(SyncRequest(
        group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None), protocol_name=getattr(request, "protocol_name", None),
        assignments=tuple((a.member_id, a.assignment) for a in request.assignments or ())))
    return {"throttle_time_ms": 0, "error_code": int(r.error), "protocol_type": r.protocol_type,
            "protocol_name": r.protocol_name, "assignment": r.assignment}


@handles(12, 0, 4)
async def handle_heartbeat(ctx, request):
    if denied(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED}
    error = await service(ctx).heartbeat(request.group_id, request.generation_id, request.member_id,
                                         getattr(request, "group_instance_id", None))
    return {"throttle_time_ms": 0, "error_code": int(error)}


@handles(13, 0, 5)
async def handle_leave_group(ctx, request):
    if denied(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED, "members": []}
    if ctx.api_version >= 3:
        members = [(m.member_id or None, m.group_instance_id, getattr(m, "reason", None))
                   for m in request.members]
    else:
        members = [(request.member_id, None, None)]
    result = await service(ctx).leave(request.group_id, members)
    errors = [int(e) for e in result.member_errors]
    top = int(result.error)
    if ctx.api_version < 3 and errors and top == 0:
        top = errors[0]
    return {"throttle_time_ms": 0, "error_code": top,
            "members": [{"member_id": m or "", "group_instance_id": i, "error_code": e}
                        for (m, i, _), e in zip(members, errors)]}


@handles(8, 2, 10)
async def handle_offset_commit(ctx, request):
    by_id = ctx.api_version >= 10
    topics = named(ctx, request.topics) if by_id else request.topics
    refused: set[str] = set()
    if acls_on(ctx):
        if denied(ctx, READ, GROUP, request.group_id):
            answer = partition_errors(topics, {}, GROUP_DENIED)
            return {"throttle_time_ms": 0, "topics": with_ids(answer, topics, by_id)}
        refused = unauthorized(ctx, READ, TOPIC, [t.name for t in topics if t.name is not None])
    offsets = [OffsetCommit(t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                            p.committed_metadata) for t in topics if t.name is not None and t.name not in refused
               for p in t.partitions]
    errors = iter(())
    if offsets or not refused:
        errors = iter(await service(ctx).commit_offsets(
            request.group_id, request.generation_id_or_member_epoch, request.member_id or "",
            getattr(request, "group_instance_id", None), offsets, api_version=ctx.api_version))
    topic_errors = {**dict.fromkeys(refused, TOPIC_DENIED), None: int(ErrorCode.UNKNOWN_TOPIC_ID)}
    return {"throttle_time_ms": 0, "topics": with_ids(partition_errors(topics, topic_errors, errors), topics, by_id)}


def named(ctx, topics) -> list[SimpleNamespace]:
    """OffsetCommit and OffsetFetch v10 name topics by id (KIP-848), as Fetch v13+: each requested
    topic with the ``name`` of its id, None for an id no topic has (answered UNKNOWN_TOPIC_ID)."""
    by_id = ctx.broker.logs.topics_by_id
    return [SimpleNamespace(name=getattr(by_id.get(t.topic_id), "name", None), topic_id=t.topic_id,
                            partitions=getattr(t, "partitions", None),
                            partition_indexes=getattr(t, "partition_indexes", None)) for t in topics]


def with_ids(answer: list[dict], topics, by_id: bool) -> list[dict]:
    """``answer`` (one entry per requested topic, in order) with each topic's id when ``by_id``."""
    if by_id:
        for entry, t in zip(answer, topics):
            entry["topic_id"] = t.topic_id
    return answer


def partition_errors(topics, topic_errors: dict[str, int], errors) -> list[dict]:
    """The topics/partitions of an OffsetCommit, TxnOffsetCommit or OffsetDelete answer: a topic in
    ``topic_errors`` has that error on every partition, the others take the next of ``errors``
    (an iterator, in request order) or, given an int, that error."""
    def error_of(topic: str) -> int:
        if topic in topic_errors:
            return topic_errors[topic]
        return errors if isinstance(errors, int) else int(next(errors))
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": error_of(t.name)}
                                            for p in t.partitions]} for t in topics]


def fetch_group_offsets(ctx, group_id: str, topics, require_stable: bool = False, by_id: bool = False) -> list[dict]:
    unknown: list = []
    if by_id and topics is not None:          # v10: topics by id; an unknown id is UNKNOWN_TOPIC_ID
        topics = named(ctx, topics)
        unknown = [t for t in topics if t.name is None]
        topics = [t for t in topics if t.name is not None]
    refused: list = []
    if topics is not None and acls_on(ctx):
        denied_names = unauthorized(ctx, DESCRIBE, TOPIC, [t.name for t in topics])
        refused = [t for t in topics if t.name in denied_names]
        topics = [t for t in topics if t.name not in denied_names]
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    rows = service(ctx).fetch_offsets(group_id, wanted, require_stable)
    by_topic: dict[str, list] = {}
    for topic, partition, offset, leader_epoch, metadata, error in rows:
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset, "committed_leader_epoch": leader_epoch,
            "metadata": metadata, "error_code": int(error)})
    if topics is None and acls_on(ctx):      # all offsets: topics not allowed DESCRIBE are left out
        for name in unauthorized(ctx, DESCRIBE, TOPIC, by_topic, log=False):
            del by_topic[name]
    out = [{"name": name, "partitions": parts} for name, parts in by_topic.items()] + [
        {"name": t.name, "partitions": no_offsets(t.partition_indexes, TOPIC_DENIED)} for t in refused]
    if not by_id:
        return out
    logs = ctx.broker.logs      # all offsets: a topic deleted since its commit has no id and is left out
    out = [{**entry, "topic_id": logs.get(entry["name"]).topic_id} for entry in out
           if logs.get(entry["name"]) is not None]
    return out + [{"topic_id": t.topic_id, "partitions": no_offsets(t.partition_indexes,
                                                                    int(ErrorCode.UNKNOWN_TOPIC_ID))}
                  for t in unknown]


def no_offsets(partitions, error: int) -> list[dict]:
    return [{"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": error} for p in partitions]


@handles(9, 1, 10)
async def handle_offset_fetch(ctx, request):
    stable = bool(getattr(request, "require_stable", False))     # v7+ (KIP-447)
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            error = GROUP_DENIED if denied(ctx, DESCRIBE, GROUP, g.group_id) else None
            if error is None:
                try:
                    await service(ctx).confirm_owner(g.group_id)
                except KafkaApiError as exc:
                    error = int(exc.code)
            if error is None and ctx.api_version >= 9:       # KIP-848: the member's epoch is checked
                member_error = service(ctx).validate_offset_fetch(g.group_id, g.member_id, g.member_epoch)
                error = None if member_error is None else int(member_error)
            groups.append({"group_id": g.group_id, "topics": [], "error_code": error} if error is not None else
                          {"group_id": g.group_id, "topics": fetch_group_offsets(ctx, g.group_id, g.topics, stable,
                                                                                 ctx.api_version >= 10),
                           "error_code": 0})
        return {"throttle_time_ms": 0, "groups": groups}
    if denied(ctx, DESCRIBE, GROUP, request.group_id):
        # v1 has no top-level error: each partition carries it (Kafka 3.x's answer; 4.0 lists none)
        topics = [] if ctx.api_version >= 2 else [
            {"name": t.name, "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                                             "error_code": GROUP_DENIED} for p in t.partition_indexes]}
            for t in request.topics or ()]
        return {"throttle_time_ms": 0, "topics": topics, "error_code": GROUP_DENIED}
    await service(ctx).confirm_owner(request.group_id)
    return {"throttle_time_ms": 0, "topics": fetch_group_offsets(ctx, request.group_id, request.topics, stable),
            "error_code": 0}


@handles(15, 0, 6)
async def handle_describe_groups(ctx, request):
    refused = unauthorized(ctx, DESCRIBE, GROUP, request.groups)
    with_operations = bool(acls_on(ctx) and getattr(request, "include_authorized_operations", False))
    out = [{"error_code": GROUP_DENIED, "error_message": None, "group_id": group_id, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": None}
           for group_id in request.groups if group_id in refused]
    for group_id in request.groups:
        if group_id in refused:
            continue
        if share.is_share_group(ctx, group_id):        # KIP-932; v6 says it is not a classic group, as Kafka
            out.append(share.describe_share_group_classic(ctx, group_id) if ctx.api_version < 6 else
                       not_classic(group_id))
            continue
        d = service(ctx).describe(group_id)
        error, message = int(d.error), None
        if ctx.api_version >= 6 and error == 0 and d.state == "Dead":     # KIP-1043: say it
            error, message = int(ErrorCode.GROUP_ID_NOT_FOUND), (
                not_classic(group_id)["error_message"] if service(ctx).is_consumer_group(group_id)
                else f"Group {group_id} not found.")
        out.append({"error_code": error, "error_message": message, "group_id": group_id,
                    "group_state": d.state, "protocol_type": d.protocol_type or "",
                    "protocol_data": d.protocol_name or "",
                    "members": [{"member_id": m, "group_instance_id": i, "client_id": c, "client_host": h,
                                 "member_metadata": md, "member_assignment": a}
                                for m, i, c, h, md, a in d.members],
                    "authorized_operations": authorized_operations(ctx, GROUP, group_id)
                    if with_operations and error == 0 else None})
    return {"throttle_time_ms": 0, "groups": out}


def not_classic(group_id: str) -> dict:
    """DescribeGroups v6's entry for a group of another type (KIP-1043): Dead, GROUP_ID_NOT_FOUND."""
    return {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
            "error_message": f"Group {group_id} is not a classic group.", "group_id": group_id,
            "group_state": "Dead", "protocol_type": "", "protocol_data": "", "members": [],
            "authorized_operations": None}


@handles(16, 0, 5)
async def handle_list_groups(ctx, request):
    states = list(request.states_filter) if getattr(request, "states_filter", None) else None
    types = {t.lower() for t in getattr(request, "types_filter", None) or ()}
    groups = [] if types and "classic" not in types else [
        (g, pt, st, "classic") for g, pt, st in service(ctx).list_groups(states)]
    if not types or "consumer" in types:         # KIP-848 groups: protocol type "consumer", as Kafka
        groups = sorted(groups + [(g, "consumer", st, "consumer")
                                  for g, st in service(ctx).list_consumer_groups(states)])
    shared = share.share_group_rows(ctx, states, getattr(request, "types_filter", None))       # KIP-932
    if acls_on(ctx) and not ctx.allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):    # then only groups it may DESCRIBE
        hidden = unauthorized(ctx, DESCRIBE, GROUP, [row[0] for row in groups] + [r["group_id"] for r in shared],
                              log=False)
        groups = [row for row in groups if row[0] not in hidden]
        shared = [row for row in shared if row["group_id"] not in hidden]
    return {"throttle_time_ms": 0, "error_code": 0,
            "groups": [{"group_id": g, "protocol_type": pt, "group_state": st, "group_type": gt}
                       for g, pt, st, gt in groups] + shared}


@handles(42, 0, 2)
async def handle_delete_groups(ctx, request):
    names, refused = list(request.groups_names), []
    if acls_on(ctx):                  # as Kafka: each name once, the denied ones after the others
        denied_names = unauthorized(ctx, DELETE, GROUP, names)
        refused = [g for g in dict.fromkeys(names) if g in denied_names]
        names = [g for g in dict.fromkeys(names) if g not in denied_names]
    shared = [g for g in names if share.is_share_group(ctx, g)]       # KIP-932: deleted by their coordinator
    names = [g for g in names if g not in shared]
    errors = await service(ctx).delete_groups(names) if names or not (refused or shared) else []
    return {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": int(e)} for g, e in zip(names, errors)]
            + [{"group_id": g, "error_code": int(await ctx.broker.shares.delete_group(g))} for g in shared]
            + [{"group_id": g, "error_code": GROUP_DENIED} for g in refused]}


@handles(47, 0, 0)
async def handle_offset_delete(ctx, request):
    refused: set[str] = set()
    if acls_on(ctx):
        if denied(ctx, DELETE, GROUP, request.group_id):
            return {"error_code": GROUP_DENIED, "throttle_time_ms": 0, "topics": []}
        refused = unauthorized(ctx, READ, TOPIC, [t.name for t in request.topics])
    wanted = [(t.name, p.partition_index) for t in request.topics if t.name not in refused for p in t.partitions]
    top, per_partition = await service(ctx).delete_offsets(request.group_id, wanted)
    return {"error_code": int(top), "throttle_time_ms": 0,
            "topics": partition_errors(request.topics, dict.fromkeys(refused, TOPIC_DENIED), iter(per_partition))}
