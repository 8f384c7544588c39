"""DescribeProducers (61), DescribeTransactions (65), ListTransactions (66): what the admin
tools (``kafka-transactions.sh``: describe, list, describe-producers, find-hanging) read.

Reads only, answered as Kafka's KafkaApis does:

* DescribeTransactions: per id, the transaction coordinator's state (``kwire.services.transactions``):
  NOT_COORDINATOR for an id another broker coordinates (cluster mode),
  COORDINATOR_LOAD_IN_PROGRESS while its partition loads, TRANSACTIONAL_ID_NOT_FOUND,
  INVALID_REQUEST for an empty id.  Topics are those of the transaction (Empty and
  Complete* have none).
* ListTransactions (v1 adds ``duration_filter``, v2 ``transactional_id_pattern``, KIP-1152): the
  ids of the ``__transaction_state`` partitions this broker leads, so a client asks every broker;
  unknown state names are echoed in ``unknown_state_filters``.  A pattern (null or empty: no
  filter) must match the whole id, as Java's ``Matcher.matches``; one that does not compile is
  INVALID_REGULAR_EXPRESSION with nothing listed.
* DescribeProducers: per partition, the producer state of this broker's replica (leader or
  follower, as Kafka), each producer with its last sequence, the max timestamp of its last
  batch, the coordinator epoch of its last marker and the first offset of its open
  transaction (-1: none).  An invalid topic name is INVALID_TOPIC_EXCEPTION, an unknown
  topic or partition UNKNOWN_TOPIC_OR_PARTITION, a partition of the cluster this broker
  holds no replica of NOT_LEADER_OR_FOLLOWER (Kafka's ReplicaManager.getPartitionOrError),
  an offline one KAFKA_STORAGE_ERROR.

ACLs, as Kafka's KafkaApis checks them (nothing with no authorizer): DescribeTransactions
answers an id the principal may not DESCRIBE with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
leaves out the topics it may not DESCRIBE; ListTransactions leaves out the ids it may not
DESCRIBE; DescribeProducers answers a valid topic it may not READ with
TOPIC_AUTHORIZATION_FAILED on each partition (before telling whether it exists).

None of them raises (DescribeProducers and DescribeTransactions have no top-level error code
to fall back on).
"""
from __future__ import annotations

import re

from kwire.admin.topics import validate_topic_name
from kwire.codecs.errors import ErrorCode, KafkaApiError

from kwire.handlers.registry import handles
from kwire.handlers.authz_groups import DESCRIBE, READ, TOPIC, TRANSACTIONAL_ID, acls_on, denied, unauthorized


@handles(65, 0, 0)
async def handle_describe_transactions(ctx, request):
    ids = list(request.transactional_ids)
    refused = unauthorized(ctx, DESCRIBE, TRANSACTIONAL_ID, ids)
    described = iter(ctx.broker.transactions.describe_transactions([t for t in ids if t not in refused]))
    states = []
    for transactional_id in ids:
        if transactional_id in refused:
            states.append({"error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                           "transactional_id": transactional_id, "topics": []})
            continue
        d = next(described)
        topics = d.topics
        if topics and acls_on(ctx):      # only the partitions of topics it may DESCRIBE
            hidden = unauthorized(ctx, DESCRIBE, TOPIC, [topic for topic, _ in topics], log=False)
            topics = [(topic, partitions) for topic, partitions in topics if topic not in hidden]
        states.append({
            "error_code": int(d.error), "transactional_id": d.transactional_id,
            "transaction_state": d.state, "transaction_timeout_ms": d.transaction_timeout_ms,
            "transaction_start_time_ms": d.transaction_start_time_ms, "producer_id": d.producer_id,
            "producer_epoch": d.producer_epoch,
            "topics": [{"topic": topic, "partitions": list(partitions)} for topic, partitions in topics]})
    return {"throttle_time_ms": 0, "transaction_states": states}


def id_pattern(pattern: str | None) -> re.Pattern | None:
    """The compiled ListTransactions v2 filter, None for no filter; raises ``re.error``."""
    return re.compile(pattern) if pattern else None


@handles(66, 0, 2)
async def handle_list_transactions(ctx, request):
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    try:
        pattern = id_pattern(request.transactional_id_pattern if ctx.api_version >= 2 else None)
    except re.error:
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.INVALID_REGULAR_EXPRESSION),
                "unknown_state_filters": [], "transaction_states": []}
    listing = ctx.broker.transactions.list_transactions(
        list(request.state_filters), list(request.producer_id_filters), duration)
    rows = listing.states
    if pattern is not None:
        rows = [row for row in rows if pattern.fullmatch(row[0])]
    if acls_on(ctx):                     # only the ids it may DESCRIBE
        hidden = unauthorized(ctx, DESCRIBE, TRANSACTIONAL_ID, [t for t, _, _ in rows], log=False)
        rows = [row for row in rows if row[0] not in hidden]
    return {"throttle_time_ms": 0, "error_code": int(listing.error),
            "unknown_state_filters": list(listing.unknown_state_filters),
            "transaction_states": [{"transactional_id": t, "producer_id": pid, "transaction_state": state}
                                   for t, pid, state in rows]}


@handles(61, 0, 0)
async def handle_describe_producers(ctx, request):
    topics = []
    for t in request.topics:
        error = _topic_error(ctx, t.name)
        topics.append({"name": t.name, "partitions": [
            _partition_error(p, *error) if error else _producers_of(ctx, t.name, p)
            for p in t.partition_indexes]})
    return {"throttle_time_ms": 0, "topics": topics}


def _topic_error(ctx, name: str) -> tuple[ErrorCode, str | None] | None:
    try:
        validate_topic_name(name)
    except KafkaApiError as exc:
        return exc.code, exc.message
    if denied(ctx, READ, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if not _topic_exists(ctx, name):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    return None


def _topic_exists(ctx, name: str) -> bool:
    """In the cluster's metadata (cluster mode), or on this node."""
    return ctx.broker.topology.topic_exists(name)


def _producers_of(ctx, topic: str, partition: int) -> dict:
    plog = ctx.broker.logs.partition(topic, partition)
    missing = ctx.broker.topology.replica_error(topic, partition, plog)   # no replica here
    if missing is not None:
        return _partition_error(partition, missing)
    try:
        producers = plog.active_producers()
    except KafkaApiError as exc:            # offline: KAFKA_STORAGE_ERROR
        return _partition_error(partition, exc.code, exc.message)
    return {"partition_index": partition, "error_code": 0, "error_message": None, "active_producers": [
        {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch, "last_sequence": p.last_sequence,
         "last_timestamp": p.last_timestamp, "coordinator_epoch": p.coordinator_epoch,
         "current_txn_start_offset": p.current_txn_start_offset} for p in producers]}


def _partition_error(partition: int, code: ErrorCode, message: str | None = None) -> dict:
    return {"partition_index": partition, "error_code": int(code), "error_message": message,
            "active_producers": []}
