"""Fetch (1): byte slices of the log, long-polled until min_bytes or max_wait_ms.

A client's max_wait_ms is capped by the broker's ``fetch.max.wait.ms``, and a
parked fetch ends early when its client closes the connection.

Fetch sessions (KIP-227, kwire.services.fetch_sessions): session 0 with epoch -1 (librdkafka,
aiokafka, v4-6) is answered sessionless without touching the cache; epoch 0 is a
full fetch that also creates a session when ``max.incremental.fetch.session.cache.slots``
allows; a later epoch reads every partition of the session and answers only those
with records, a new high watermark or log start offset, or an error.
Fetch v13+ names topics by id: an id no topic has is UNKNOWN_TOPIC_ID; a session
whose topic was deleted and created again under its name is INCONSISTENT_TOPIC_ID.

Every answer carries the last stable offset (the high watermark, or the first
offset of the oldest open transaction if lower).  A read_committed fetch
(isolation_level 1) stops there and lists the aborted transactions of the range
it read, which the client uses to skip their records; control batches are
returned as they are (the clients drop them).

With an authorizer (Kafka's KafkaApis, ``FetchGate``): a follower's fetch needs CLUSTER_ACTION
on the cluster, else every partition answers TOPIC_AUTHORIZATION_FAILED; a consumer needs READ
on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED after the UNKNOWN_TOPIC_ID
check and before the existence check.  An incremental fetch checks every partition of its
session each time (an ACL may have been removed since), before the idle ones are skipped.  As in
Kafka, a refused partition does not end a long poll unless nothing else was asked for, and a v13+
response names topics by id only, so a refused topic's name is never sent.
"""
from __future__ import annotations

import trio

from kwire.admin.acls import CLUSTER_NAME, AclOperation, ResourceType
from kwire.admin.quotas import CONSUMER_BYTE_RATE, principal_user
from kwire.codecs.errors import CloseConnection, ErrorCode, KafkaApiError
from kwire.log.slices import RecordSlices

from kwire.services.fetch_sessions import (
    FINAL_EPOCH, CachedPartition, Full, Incremental, SessionError, partition_key,
)
from kwire.handlers.registry import handles
from kwire.handlers import authz

# Record bytes below this size are copied into the response; larger runs are
# streamed from the segment files with sendfile.
SENDFILE_MIN_BYTES = 16 * 1024


class FileRecords:
    """Record bytes to stream from segment files; ``close`` releases the descriptors."""

    def __init__(self, slices):
        self.slices = slices
        self.size = sum(s.size for s in slices)

    def close(self) -> None:
        for s in self.slices:
            s.close()


def empty_partition(index: int, code: ErrorCode, plog=None) -> dict:
    return {"partition_index": index, "error_code": int(code),
            "high_watermark": plog.high_watermark if plog else -1,
            "last_stable_offset": plog.last_stable_offset if plog else -1,
            "log_start_offset": plog.log_start_offset if plog else -1,
            "aborted_transactions": None if plog is None else [], "preferred_read_replica": -1,
            "records": b""}


def read_partition(ctx, topic_name: str, p, budget: int, first: bool,
                   replica_id: int = -1, read_committed: bool = False) -> tuple[dict, int]:
    plog = ctx.broker.logs.partition(topic_name, p.partition)
    if plog is None:
        return empty_partition(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), 0
    partitions = ctx.broker.partitions   # kwire.services.partitions: leadership (cluster), the leader epoch
    try:
        # (the offset a read may go up to: None = the high watermark, a follower's is the log end;
        # the leader state for a follower's fetch, else None)
        max_offset, leader = partitions.check_serving(topic_name, p.partition, plog, p.current_leader_epoch,
                                                      replica_id)
        if read_committed and replica_id < 0:
            max_offset = plog.last_stable_offset
        if leader is not None and partitions.follower_throttled(topic_name, p.partition, leader, replica_id):
            budget, first = 0, False     # leader.replication.throttled.rate exceeded: no records now
        if budget > 0 or first:
            slices = plog.read_slices(p.fetch_offset, min(p.partition_max_bytes, max(budget, 0)),
                                      min_one_batch=first, max_offset=max_offset)
        else:
            slices = RecordSlices()
            if not plog.log_start_offset <= p.fetch_offset <= plog.log_end_offset:
                raise KafkaApiError(ErrorCode.OFFSET_OUT_OF_RANGE)
    except KafkaApiError as exc:
        return empty_partition(p.partition, exc.code, plog), 0
    if leader is not None:        # a valid follower fetch, read without error: now it counts
        partitions.follower_fetched(topic_name, p.partition, leader, replica_id, p.fetch_offset,
                                    getattr(p, "log_start_offset", -1), slices.size)
    entry = empty_partition(p.partition, ErrorCode.NONE, plog)
    entry["records"] = slices
    if read_committed and slices:
        entry["aborted_transactions"] = [
            {"producer_id": producer_id, "first_offset": first_offset}
            for producer_id, first_offset in plog.aborted_transactions(p.fetch_offset, max_offset)]
    return entry, slices.size


def materialize(responses: list[dict]) -> None:
    """Turn each partition's record slices into bytes or, when large, files for sendfile.

    Runs with no await after the slices were computed, so they are consistent."""
    for topic in responses:
        for entry in topic["partitions"]:
            slices = entry["records"]
            if not slices:
                entry["records"] = b""
            elif slices.size < SENDFILE_MIN_BYTES:
                entry["records"] = slices.to_bytes()
            else:
                entry["records"] = FileRecords(slices.open_files())


class FetchGate:
    """What the ACLs let one Fetch read, decided once per topic (made only with an authorizer)."""
    __slots__ = ("ctx", "all_denied", "check_topics", "decided", "refused")

    def __init__(self, ctx, replica_id: int):
        self.ctx = ctx
        follower = replica_id >= 0
        self.all_denied = follower and authz.denied(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                                    CLUSTER_NAME)
        self.check_topics = not follower      # an allowed follower reads every topic
        self.decided: dict[str, bool] = {}
        self.refused = 0                      # partitions answered TOPIC_AUTHORIZATION_FAILED

    def denied(self, name: str | None, partitions: int = 1) -> bool:
        """Whether a topic (None: an unknown topic id) is refused; if so, counts its
        ``partitions`` as refused."""
        if self.all_denied:
            refused = True
        elif name is None or not self.check_topics:
            return False
        else:
            refused = self.decided.get(name)
            if refused is None:
                refused = self.decided[name] = authz.denied(self.ctx, AclOperation.READ, ResourceType.TOPIC,
                                                            name)
        if refused:
            self.refused += partitions
        return refused

    def only_refusals(self, partitions: int) -> bool:
        """Whether every one of ``partitions`` (> 0) was refused: answer at once, as Kafka does
        when nothing is left to read."""
        return partitions > 0 and self.refused >= partitions


def refused_partition(index: int) -> dict:
    return empty_partition(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def resolve_topic(ctx, topic, by_id: bool) -> tuple[str | None, object]:
    """(name, topic_id) of a requested topic: v13+ names it by id (None when unknown)."""
    if not by_id:
        return topic.topic, None
    found = ctx.broker.logs.topics_by_id.get(topic.topic_id)
    return (found.name if found is not None else None), topic.topic_id


def build_response(ctx, request, replica_id: int, read_committed: bool,
                   gate: FetchGate | None = None, cap: int | None = None) -> tuple[list[dict], int, bool]:
    """Read the request's partitions in order; (topic entries, record bytes, any error).
    A partition ``gate`` refuses is answered TOPIC_AUTHORIZATION_FAILED and is no error here
    unless every partition is refused.  ``cap``: a consumer quota's bound on the bytes."""
    budget = request.max_bytes if ctx.api_version >= 3 else 0x7FFFFFFF
    if cap is not None:
        budget = min(budget, cap)
    by_id = ctx.api_version >= 13
    total = 0
    errors = False
    responses = []
    if gate is not None:
        gate.refused = 0
    for topic in request.topics:
        parts = []
        if by_id:
            name, topic_id = resolve_topic(ctx, topic, True)
            responses.append({"topic": name, "topic_id": topic_id, "partitions": parts})
            if name is None and (gate is None or not gate.all_denied):
                parts += [empty_partition(p.partition, ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partitions]
                errors = errors or bool(parts)
                continue
        else:
            name = topic.topic
            responses.append({"topic": name, "partitions": parts})
        if gate is not None and gate.denied(name, len(topic.partitions)):
            parts += [refused_partition(p.partition) for p in topic.partitions]
            continue
        for p in topic.partitions:
            entry, size = read_partition(ctx, name, p, budget - total, total == 0, replica_id, read_committed)
            total += size
            errors = errors or entry["error_code"] != 0
            parts.append(entry)
    if gate is not None and gate.only_refusals(sum(len(t["partitions"]) for t in responses)):
        errors = True
    return responses, total, errors


async def park(ctx, partitions, deadline: float, replica: bool = False) -> None:
    """Wait for ``partitions`` to move (kwire.server.broker.Broker.wait_appended) or for ``deadline``
    (trio clock).

    Raises CloseConnection when a client closes its end meanwhile, so an
    abandoned long poll releases its socket at once instead of at the
    deadline.  A follower's fetch is not watched: followers do not abandon
    fetches, and its wait is replica.fetch.wait.max.ms at most, while a watch
    costs a task per fetch on the replication path.  Cancel-safe: nothing is
    held while parked.
    """
    if replica:
        await ctx.broker.wait_appended(partitions, deadline, replica=True)
        return
    gone = False
    parked = trio.current_time()
    async with trio.open_nursery() as nursery:
        async def watch_peer() -> None:
            nonlocal gone
            await ctx.wait_peer_closed()
            gone = True
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_peer)
        await ctx.broker.wait_appended(partitions, deadline)
        nursery.cancel_scope.cancel()
    ctx.waited_s += trio.current_time() - parked      # not request time (request_percentage)
    if gone:
        raise CloseConnection("the client left during a long-poll fetch", quiet=True)


def session_partition(ctx, cp: CachedPartition, uses_topic_ids: bool) -> ErrorCode | None:
    """Resolve a cached partition's topic; the error to answer instead of reading, if any.

    A session keeps the name its topic id resolved to; if that name now belongs to a
    topic with another id (deleted and created again), Kafka answers INCONSISTENT_TOPIC_ID."""
    if not uses_topic_ids:
        return None
    logs = ctx.broker.logs
    if cp.topic is None:
        found = logs.topics_by_id.get(cp.topic_id)
        if found is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        cp.topic = found.name
        return None
    current = logs.topics.get(cp.topic)
    if current is not None and current.topic_id != cp.topic_id:
        return ErrorCode.INCONSISTENT_TOPIC_ID
    return None


def idle(plog, cp: CachedPartition, read_committed: bool) -> bool:
    """Whether a session partition has nothing to answer: caught up, same high watermark and
    log start offset as last answered, online, no leader epoch error.  Such a partition would
    be read and then left out of the response; skipping it is what makes an incremental fetch
    of many idle partitions cheap.  Only where every partition is served (a single node: in a
    cluster, leadership is checked)."""
    if plog.high_watermark != cp.high_watermark or \
            plog.log_start_offset != cp.local_log_start_offset or plog.offline:
        return False
    if cp.fetch_offset != (plog.last_stable_offset if read_committed else plog.high_watermark):
        return False
    epoch = cp.current_leader_epoch
    return epoch is None or epoch < 0 or epoch == plog.leader_epoch


def build_incremental(ctx, request, session, replica_id: int, read_committed: bool,
                      gate: FetchGate | None = None, cap: int | None = None):
    """Read every partition of ``session`` in its order; (cached partition, entry) pairs,
    record bytes, any error.  ``gate`` is asked about every partition, idle or not."""
    budget = request.max_bytes if cap is None else min(request.max_bytes, cap)
    total = 0
    errors = False
    read = []
    skip_idle = ctx.broker.partitions.serves_every_partition and replica_id < 0
    topics = ctx.broker.logs.topics
    by_id = session.uses_topic_ids
    if gate is not None:
        gate.refused = 0
    for cp in list(session.partitions.values()):
        if gate is not None and gate_refuses(ctx, gate, cp, by_id):
            read.append((cp, refused_partition(cp.partition)))
            continue
        if skip_idle and cp.topic is not None:
            topic = topics.get(cp.topic)
            if topic is not None and (not by_id or topic.topic_id == cp.topic_id) and \
                    0 <= cp.partition < len(topic.partitions) and \
                    idle(topic.partitions[cp.partition], cp, read_committed):
                continue
        code = session_partition(ctx, cp, session.uses_topic_ids)
        if code is not None:
            entry, size = empty_partition(cp.partition, code), 0
        else:
            entry, size = read_partition(ctx, cp.topic, cp, budget - total, total == 0, replica_id,
                                         read_committed)
        total += size
        errors = errors or entry["error_code"] != 0
        read.append((cp, entry))
    if gate is not None and gate.only_refusals(len(session.partitions)):
        errors = True
    return read, total, errors


def gate_refuses(ctx, gate: FetchGate, cp: CachedPartition, by_id: bool) -> bool:
    """Whether ``gate`` refuses a session partition; resolves its topic id first (an unknown id
    is refused only with the rest of a refused follower's fetch)."""
    if gate.all_denied:
        return gate.denied(None)
    if by_id and cp.topic is None and session_partition(ctx, cp, True) is not None:
        return False                      # UNKNOWN_TOPIC_ID, answered by the read
    return gate.denied(cp.topic)


def incremental_topics(session, read) -> list[dict]:
    """The partitions an incremental response carries, grouped by consecutive topic; a
    partition that returned records moves to the end of the session's order."""
    responses: list[dict] = []
    last = None
    for cp, entry in read:
        if not cp.must_respond(entry):
            continue
        if entry["records"]:
            session.move_to_end(cp)
        key = cp.topic_id if session.uses_topic_ids else cp.topic
        if key != last or not responses:
            responses.append({"topic": cp.topic, "topic_id": cp.topic_id, "partitions": []})
            last = key
        responses[-1]["partitions"].append(entry)
    return responses


def request_partitions(ctx, request, uses_topic_ids: bool) -> list[CachedPartition]:
    """An incremental request's partitions as cached partitions (names resolved by id)."""
    out = []
    for topic in request.topics:
        name, topic_id = resolve_topic(ctx, topic, uses_topic_ids)
        for p in topic.partitions:
            cp = CachedPartition(name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes)
            cp.update_request(p)
            out.append(cp)
    return out


def forgotten_keys(request, uses_topic_ids: bool) -> list[tuple]:
    return [partition_key(uses_topic_ids, t.topic, t.topic_id if uses_topic_ids else None, i)
            for t in request.forgotten_topics_data or () for i in t.partitions]


def new_session(ctx, request, context: Full, responses: list[dict]) -> int:
    """After a full fetch: cache its partitions with what was answered; the session id or 0."""
    partitions = []
    for topic, answered in zip(request.topics, responses):
        for p, entry in zip(topic.partitions, answered["partitions"]):
            cp = CachedPartition(answered["topic"], answered.get("topic_id"), p.partition, p.fetch_offset,
                                 p.partition_max_bytes)
            cp.update_request(p)
            cp.high_watermark = entry["high_watermark"]
            cp.local_log_start_offset = entry["log_start_offset"]
            partitions.append(cp)
    return ctx.broker.fetch_sessions.create_session(ctx.broker.clock.now_ms(), context.privileged,
                                                    context.uses_topic_ids, partitions)


def fetch_context(ctx, request, replica_id: int):
    """What the session cache makes of a v7+ request that is not (session 0, epoch -1)."""
    return ctx.broker.fetch_sessions.new_context(
        ctx.api_version, request.session_id, request.session_epoch, replica_id >= 0,
        lambda ids: request_partitions(ctx, request, ids), lambda ids: forgotten_keys(request, ids),
        ctx.broker.clock.now_ms())


def replica_state_id(request) -> int:
    """v15+ moved the follower's id into the tagged ReplicaState."""
    state = request.replica_state
    return state.replica_id if state is not None else -1


def deadline_of(ctx, request) -> float:
    max_wait_ms = min(max(request.max_wait_ms, 0), ctx.broker.config.value_of("fetch.max.wait.ms"))
    return trio.current_time() + max_wait_ms / 1000


def quota_cap(ctx, replica_id: int) -> int | None:
    """The most bytes a consumer under a consumer_byte_rate quota may be sent at once (Kafka's
    getMaxValueInQuotaWindow); None: no quota (followers never have one)."""
    quotas = ctx.broker.quotas
    if replica_id >= 0 or not quotas.active:
        return None
    cap = quotas.enforcer.max_value_in_window(CONSUMER_BYTE_RATE, principal_user(ctx.principal),
                                              ctx.client_id or "")
    return None if cap is None else max(1, int(cap))


def charge_quota(ctx, total: int) -> int:
    """Record a consumer's response bytes against its quota; the throttle in ms.  A throttled
    fetch answers nothing, so its bytes are taken back (Kafka's unrecordQuotaSensor) and the
    connection is muted for the throttle (kwire.server.connection)."""
    enforcer = ctx.broker.quotas.enforcer
    user, client_id, now_ms = principal_user(ctx.principal), ctx.client_id or "", ctx.broker.clock.now_ms()
    throttle = enforcer.record(CONSUMER_BYTE_RATE, user, client_id, total, now_ms)
    if throttle > 0:
        enforcer.unrecord(CONSUMER_BYTE_RATE, user, client_id, total, now_ms)
        enforcer.throttled(CONSUMER_BYTE_RATE, user, client_id, throttle)
        ctx.throttle_ms = max(ctx.throttle_ms, throttle)
    return throttle


@handles(1, 4, 18)
async def handle_fetch(ctx, request):
    version = ctx.api_version
    replica_id = request.replica_id if version < 15 else replica_state_id(request)
    read_committed = request.isolation_level == 1
    gate = FetchGate(ctx, replica_id) if ctx.broker.acls.enabled else None
    if version >= 7 and (request.session_epoch != FINAL_EPOCH or request.session_id != 0):
        return await session_fetch(ctx, request, replica_id, read_committed, gate)
    # sessionless (v4-6, or session 0 with epoch -1: librdkafka, aiokafka): the hot path, no cache
    max_wait_ms = min(max(request.max_wait_ms, 0), ctx.broker.config.value_of("fetch.max.wait.ms"))
    deadline = trio.current_time() + max_wait_ms / 1000
    cap = quota_cap(ctx, replica_id)
    while True:
        responses, total, errors = build_response(ctx, request, replica_id, read_committed, gate, cap)
        if total >= max(request.min_bytes, 1) or errors or trio.current_time() >= deadline:
            break
        await park(ctx, waited_partitions(responses), deadline, replica_id >= 0)
    if cap is not None and (throttle := charge_quota(ctx, total)):
        return {"throttle_time_ms": throttle, "error_code": 0, "session_id": 0, "responses": []}
    if ctx.broker.metrics is not None and replica_id < 0:
        ctx.broker.metrics.fetched(responses)
    materialize(responses)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}


async def session_fetch(ctx, request, replica_id: int, read_committed: bool,
                        gate: FetchGate | None = None) -> dict:
    """A fetch that names a session or asks for one (kwire.services.fetch_sessions)."""
    context = fetch_context(ctx, request, replica_id)
    if type(context) is SessionError:
        return {"throttle_time_ms": 0, "error_code": int(context.error_code), "session_id": 0,
                "responses": []}
    deadline = deadline_of(ctx, request)
    incremental = type(context) is Incremental
    cap = quota_cap(ctx, replica_id)
    while True:
        if incremental:
            read, total, errors = build_incremental(ctx, request, context.session, replica_id, read_committed,
                                                    gate, cap)
        else:
            responses, total, errors = build_response(ctx, request, replica_id, read_committed, gate, cap)
        if total >= max(request.min_bytes, 1) or errors or trio.current_time() >= deadline:
            break
        await park(ctx, session_partitions(context.session) if incremental else waited_partitions(responses),
                   deadline, replica_id >= 0)
    if cap is not None and (throttle := charge_quota(ctx, total)):
        # Kafka's getThrottledResponse: nothing read; a full fetch opens no session
        return {"throttle_time_ms": throttle, "error_code": 0,
                "session_id": context.session.id if incremental else 0, "responses": []}
    session_id = 0
    if incremental:
        session_id = context.session.id
        if not ctx.broker.fetch_sessions.epoch_still_current(context):
            return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_FETCH_SESSION_EPOCH),
                    "session_id": session_id, "responses": []}
        responses = incremental_topics(context.session, read)
    elif type(context) is Full:
        session_id = new_session(ctx, request, context, responses)
    if ctx.broker.metrics is not None and replica_id < 0:
        ctx.broker.metrics.fetched(responses)
    materialize(responses)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id, "responses": responses}


def session_partitions(session) -> list[tuple[str, int]]:
    return [(cp.topic, cp.partition) for cp in session.partitions.values() if cp.topic is not None]


def waited_partitions(responses) -> list[tuple[str, int]]:
    return [(t["topic"], p["partition_index"]) for t in responses if t["topic"] is not None
            for p in t["partitions"]]
