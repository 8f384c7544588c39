"""OffsetForLeaderEpoch (23) and ElectLeaders (43).

With an authorizer (Kafka's KafkaApis): OffsetForLeaderEpoch is open to CLUSTER_ACTION on the
cluster (followers), otherwise (consumers, KIP-320) each topic needs DESCRIBE and a refused
topic's partitions answer TOPIC_AUTHORIZATION_FAILED.  ElectLeaders needs ALTER on the cluster,
which the server checks before dispatch (kwire.server.connection).
"""
from __future__ import annotations

from kwire.admin.acls import AclOperation, ResourceType
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.handlers import authz

PREFERRED = 0      # ElectLeaders election_type; 1 = unclean


def epoch_entry(ctx, topic_name: str, p) -> dict:
    """Where ``p.leader_epoch`` ends in this leader's log (KIP-101): the largest epoch <= the
    requested one and the start offset of the next, or the log end offset for the latest."""
    entry = {"error_code": 0, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
    plog = ctx.broker.logs.partition(topic_name, p.partition)
    if plog is None:
        entry["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return entry
    try:
        plog.health.check_online()
        ctx.broker.partitions.check_serving(topic_name, p.partition, plog, p.current_leader_epoch)
    except KafkaApiError as exc:
        entry["error_code"] = int(exc.code)
        return entry
    epoch, end_offset = plog.epoch_end_offset(p.leader_epoch)
    entry.update(leader_epoch=epoch, end_offset=end_offset)
    return entry


def refused_epochs(t) -> dict:
    return {"topic": t.topic, "partitions": [
        {"error_code": int(authz.TOPIC_DENIED), "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
        for p in t.partitions]}


@handles(23, 2, 4)
async def handle_offset_for_leader_epoch(ctx, request):
    denied = None
    if ctx.broker.acls.enabled and not authz.on_cluster(ctx, AclOperation.CLUSTER_ACTION):
        denied = authz.unauthorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics))
    return {"throttle_time_ms": 0, "topics": [
        refused_epochs(t) if denied and t.topic in denied else
        {"topic": t.topic, "partitions": [epoch_entry(ctx, t.topic, p) for p in t.partitions]}
        for t in request.topics]}


def _results(wanted: dict[str, list[int]], codes) -> list[dict]:
    return [{"topic": topic, "partition_result": [
        {"partition_id": p, "error_code": int(codes(topic, p)), "error_message": None} for p in parts]}
        for topic, parts in wanted.items()]


@handles(43, 0, 2)
async def handle_elect_leaders(ctx, request):
    """Preferred-leader election (unclean elections are refused).  A single node is always
    its partitions' preferred leader: ELECTION_NOT_NEEDED."""
    election_type = getattr(request, "election_type", PREFERRED)
    if request.topic_partitions is None:
        wanted = {t.name: list(range(len(t.partitions))) for t in ctx.broker.logs.topics.values()}
    else:
        wanted = {}
        for tp in request.topic_partitions:
            wanted.setdefault(tp.topic, []).extend(tp.partitions)
    if election_type != PREFERRED:
        code = ErrorCode.INVALID_REQUEST
        return {"throttle_time_ms": 0, "error_code": 0,
                "replica_election_results": _results(wanted, lambda t, p: code)}
    partitions = [(t, p) for t, parts in wanted.items() for p in parts]
    codes = await ctx.broker.partitions.elect_preferred(partitions, request.timeout_ms / 1000)
    return {"throttle_time_ms": 0, "error_code": 0,
            "replica_election_results": _results(wanted, lambda t, p: codes[(t, p)])}
