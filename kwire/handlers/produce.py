"""Produce (0): validate and append record batches; acks 0/1/-1; idempotence in the log.

With an authorizer (Kafka's KafkaApis): a request whose batches are transactional needs WRITE on
its transactional id, else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each
topic needs WRITE, else its partitions answer TOPIC_AUTHORIZATION_FAILED and the others are
appended.  (acks=0: any failure closes the connection, as below.)

A topic with record validation configured (kwire.schemas.produce_checks: Confluent's schema ID
validation, a Python validator) has each partition's records checked before the append; a bad
record refuses that partition's append with INVALID_RECORD and record_errors.
"""
from __future__ import annotations

import trio

from kwire.admin.acls import AclOperation, ResourceType
from kwire.codecs import records
from kwire.codecs.errors import CloseConnection, ErrorCode, KafkaApiError

from kwire.runtime.blocking import run_blocking
from kwire.schemas.produce_checks import record_checks, topic_checks
from kwire.handlers.registry import Deferred, handles
from kwire.handlers import authz
from kwire.handlers.transactions import add_implicitly, uses_tv2, verify_in_transaction

_TXN_BYTE = records.ATTRIBUTES_OFFSET + 1      # the low byte of the big-endian attributes


def partition_error(index: int, code: ErrorCode, message: str | None = None,
                    record_errors: list | None = None) -> dict:
    return {"index": index, "error_code": int(code), "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": record_errors or [], "error_message": message}


def _record_errors(exc: KafkaApiError) -> list:
    """Produce v8+ record_errors of a RecordValidationError (empty for other failures)."""
    return [{"batch_index": e.batch_index, "batch_index_error_message": e.message}
            for e in getattr(exc, "record_errors", ())]


def append_partition(ctx, topic_name: str, data, flushes: list, waits: list, acks: int) -> dict:
    plog = ctx.broker.logs.partition(topic_name, data.index)
    if plog is None:
        return partition_error(data.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    entry, result = append_to(ctx, plog, topic_name, data, flushes, waits, acks)
    metrics = ctx.broker.metrics
    if metrics is not None:        # kwire.metrics.counters: Kafka's BrokerTopicMetrics
        if result is None:
            metrics.produce_failed(topic_name, entry["error_code"])
        else:
            metrics.produced(topic_name, result.record_count, len(data.records))
    return entry


def append_to(ctx, plog, topic_name: str, data, flushes: list, waits: list, acks: int) -> tuple[dict, object]:
    """(the partition's response entry, the AppendResult or None when it failed)."""
    if ctx.broker.logs.get(topic_name).internal:
        return partition_error(data.index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                               f"cannot append to internal topic {topic_name}"), None
    if data.records is None:
        return partition_error(data.index, ErrorCode.CORRUPT_MESSAGE, "null records"), None
    try:
        # kwire.services.partitions: leadership, min.insync.replicas and the acks=all wait
        # (replicated), or nothing but the append (one node).  One validation pass over the
        # batches, including zstd before v7 (KIP-110).
        result = ctx.broker.partitions.append(topic_name, data.index, plog, data.records, ctx.broker.clock.now_ms(),
                                              ctx.api_version, acks, waits)
    except KafkaApiError as exc:
        return partition_error(data.index, exc.code, exc.message, _record_errors(exc)), None
    if result.needs_flush:
        flushes.append(plog)
    return {"index": data.index, "error_code": 0, "base_offset": result.base_offset,
            "log_append_time_ms": result.log_append_time_ms, "log_start_offset": result.log_start_offset,
            "record_errors": [], "error_message": None}, result


async def check_records(ctx, checks, topic_name: str, data) -> dict | None:
    """Before the append: the partition's error entry when its records fail the topic's
    checks, None to go on (also when the append will answer the error itself)."""
    plog = ctx.broker.logs.partition(topic_name, data.index)
    if plog is None or not data.records:
        return None
    try:
        await record_checks(ctx.broker).check(ctx.broker, checks, topic_name, data.index, data.records,
                                              plog.config.max_message_bytes)
    except KafkaApiError as exc:
        if ctx.broker.metrics is not None:
            ctx.broker.metrics.produce_failed(topic_name, int(exc.code))
        return partition_error(data.index, exc.code, exc.message, _record_errors(exc))
    return None


async def wait_for_isr(ctx, timeout_ms: int, waits: list, responses: list) -> None:
    """acks=all of replicated appends: hold the response until the high watermark passes each
    append (or the request's timeout); a partition that does not get there answers the error."""
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    entries = {(t["name"], p["index"]): p for t in responses for p in t["partition_responses"]}
    partitions = ctx.broker.partitions
    for wait in waits:
        code = await partitions.wait_acks(wait, deadline)
        if code != ErrorCode.NONE:
            tp = wait[0]
            entries[tp].update(partition_error(tp[1], code))


async def verify_first_transactional_write(ctx, request, topic_name: str, data) -> dict | None:
    """Kafka 3.6+'s partition verification (KIP-890 part 1): the first transactional batch of a
    producer in a partition is accepted only once the coordinator has the partition in that
    producer's open transaction (Produce v12+, transactions v2: once the coordinator has added
    it, the client no longer sending AddPartitionsToTxn; a producer whose epoch was bumped by
    its last EndTxn is fenced here, which closes KIP-890's hanging transaction).  Without it, a write to a partition the producer never added
    (a client bug, or a zombie) would open a transaction there that no marker ever ends: the
    last stable offset would stay behind it and read_committed consumers stop for good.
    Returns the partition's error entry, or None to go on."""
    plog = ctx.broker.logs.partition(topic_name, data.index)
    if plog is None or not data.records:
        return None
    try:
        header = records.read_header(data.records, whole=False)
    except KafkaApiError:
        return None                      # the append's validation answers it
    if not header.is_transactional or plog.has_open_transaction(header.producer_id):
        return None
    if uses_tv2(ctx):               # transactions v2: the partition joins the transaction implicitly
        code = await add_implicitly(ctx, request.transactional_id, header.producer_id, header.producer_epoch,
                                    (topic_name, data.index))
    else:
        code = await verify_in_transaction(ctx, request.transactional_id, header.producer_id,
                                           header.producer_epoch, (topic_name, data.index))
    if code == ErrorCode.NONE:
        return None
    return partition_error(data.index, code, f"producer {header.producer_id} epoch {header.producer_epoch} has "
                           f"no open transaction holding {topic_name}-{data.index}")


def has_transactional_records(request) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: whether the first batch of any partition
    is a transactional v2 batch (one byte read per partition)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            batch = data.records
            if batch is not None and len(batch) >= records.HEADER_SIZE and \
                    batch[records.MAGIC_OFFSET] == 2 and batch[_TXN_BYTE] & records.TRANSACTIONAL_BIT:
                return True
    return False


def denied_topics(ctx, request, names: list) -> set[str] | None:
    """The topics this request may not WRITE to, or None when a transactional request's
    transactional id may not WRITE (the whole request is then refused)."""
    if has_transactional_records(request):
        tid = request.transactional_id
        if tid is None or authz.denied(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return None
    return authz.unauthorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, (n for n in names if n is not None))


def topic_names(ctx, request) -> list:
    """The name of each requested topic: v13+ names them by topic id (None: an unknown id)."""
    if ctx.api_version < 13:
        return [t.name for t in request.topic_data]
    by_id = ctx.broker.logs.topics_by_id
    return [getattr(by_id.get(t.topic_id), "name", None) for t in request.topic_data]


def topic_entry(topic, name, parts: list) -> dict:
    return {"name": name, "topic_id": getattr(topic, "topic_id", None), "partition_responses": parts}


def refused(request, names: list, code: ErrorCode) -> dict:
    """Every partition of the request answering ``code`` (Kafka's ProduceRequest.getErrorResponse)."""
    return {"responses": [topic_entry(t, name, [partition_error(d.index, code) for d in t.partition_data])
                          for t, name in zip(request.topic_data, names)], "throttle_time_ms": 0}


@handles(0, 0, 13, reject_below=3)
async def handle_produce(ctx, request):
    """Produce; v12 is transactions v2's (a transaction's partitions join it implicitly), v13
    names topics by id (an unknown id: UNKNOWN_TOPIC_ID)."""
    acks = request.acks
    names = topic_names(ctx, request)
    denied = None
    if ctx.broker.acls.enabled:
        denied = denied_topics(ctx, request, names)
        if denied is None:
            if acks == 0:
                raise CloseConnection("acks=0 produce failed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): "
                                      "closing the connection")
            return refused(request, names, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    flushes: list = []
    waits: list = []
    responses = []
    appended = []
    for topic, name in zip(request.topic_data, names):
        if name is None or (denied and name in denied):
            code = authz.TOPIC_DENIED if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
            responses.append(topic_entry(topic, name, [partition_error(data.index, code)
                                                       for data in topic.partition_data]))
            continue
        parts = []
        checks = topic_checks(ctx.broker, name)      # None: nothing to check (the usual case)
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                parts.append(partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            entry = None
            if request.transactional_id is not None:
                entry = await verify_first_transactional_write(ctx, request, name, data)
            if entry is None and checks is not None:
                entry = await check_records(ctx, checks, name, data)
            if entry is None:
                entry = append_partition(ctx, name, data, flushes, waits, acks)
            if entry["error_code"] == 0:
                appended.append((name, data.index))
            parts.append(entry)
        responses.append(topic_entry(topic, name, parts))
    ctx.broker.partitions.appended(appended)     # replicated: followers now, consumers at the high watermark
    for plog in flushes:
        await run_blocking(plog.flush)
    if waits:
        async def complete() -> dict:
            await wait_for_isr(ctx, request.timeout_ms, waits, responses)
            return {"responses": responses, "throttle_time_ms": 0}
        return Deferred(complete)
    if acks == 0:
        failed = [p for t in responses for p in t["partition_responses"] if p["error_code"]]
        if failed:  # as Kafka does: the only way to tell an acks=0 producer something failed
            raise CloseConnection(f"acks=0 produce failed ({ErrorCode(failed[0]['error_code']).name}): "
                               "closing the connection")
        return None
    return {"responses": responses, "throttle_time_ms": 0}
