"""AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27),
TxnOffsetCommit (28).

The transaction coordinator runs in ``kwire.services.transactions``; WriteTxnMarkers is
what a coordinator in a ZooKeeper cluster sends the leaders of the partitions
of a decided transaction.  InitProducerId is in ``producer_id``.

Transactions v2 (KIP-890 part 2), once ``transaction.version`` 2 is finalized: a client's
Produce v12 and TxnOffsetCommit v5 add their partitions to the transaction implicitly (the
leader, or the group coordinator, asks the transaction coordinator: AddPartitionsToTxn v5 from
broker to broker, ``add_implicitly``), and EndTxn v5 bumps the epoch and answers the next
transaction's producer id and epoch.  AddPartitionsToTxn v0-3 are the clients', v4-5 the
brokers' (batched, ``verify_only`` or add).

A TxnOffsetCommit is checked with the transaction coordinator before the group
coordinator takes its offsets (``verify_txn_offset_commit``), as Kafka 3.6+ does.

ACLs, as Kafka's KafkaApis checks them (``authz_groups``; nothing with no authorizer):

* AddPartitionsToTxn (v0-3, from clients): WRITE on the transactional id (every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE per topic, internal topics never
  allowed: a denied topic's partitions are TOPIC_AUTHORIZATION_FAILED, an unknown one's
  UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED, and nothing is added.
* AddOffsetsToTxn: WRITE on the transactional id, then READ on the group.
* EndTxn: WRITE on the transactional id.
* TxnOffsetCommit: WRITE on the transactional id, then READ on the group (each an error on
  every partition), then READ per topic (a denied topic's partitions
  TOPIC_AUTHORIZATION_FAILED; the others are committed).
* WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster, checked before dispatch.
"""
from __future__ import annotations

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups import OffsetCommit
from kwire.groups.internal_topics import INTERNAL_TOPICS
from kwire.groups.txn_coordinator import OFFSETS_TOPIC, error_for_version
from kwire.admin.acls import AclOperation
from kwire.admin.features import TRANSACTION_VERSION

from kwire.handlers import authz
from kwire.handlers.registry import handles
from kwire.handlers.authz_groups import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, acls_on, denied, unauthorized

TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


# Transactions v2 (KIP-890 part 2) is on once ``transaction.version`` 2 is finalized
# (``kwire features upgrade --feature transaction.version=2``).  Until then its versions are not
# advertised (clients pick v2 from the finalized level and these versions), and a request at one
# of them is served as its v1 predecessor: no implicit add, no epoch bump.
TV1_MAX_VERSIONS = {0: 11, 26: 4, 28: 4}         # Produce, EndTxn, TxnOffsetCommit
TV2_FROM = {0: 12, 26: 5, 28: 5}


def tv2_finalized(broker) -> bool:
    return broker.features.level(TRANSACTION_VERSION) >= 2


def version_caps(broker) -> dict[int, int]:
    """The advertised maximum versions this broker's finalized features hold back."""
    return {} if tv2_finalized(broker) else TV1_MAX_VERSIONS


def uses_tv2(ctx) -> bool:
    """Whether this request (Produce, EndTxn, TxnOffsetCommit) is served as transactions v2."""
    return ctx.api_version >= TV2_FROM[ctx.api_key] and tv2_finalized(ctx.broker)


def answer(ctx, error: ErrorCode) -> int:
    return int(error_for_version(error, ctx.api_key, ctx.api_version))


@handles(24, 0, 5)
async def handle_add_partitions_to_txn(ctx, request):
    if ctx.api_version >= 4:
        return await add_partitions_from_broker(ctx, request)
    transactional_id = request.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    refused: set[str] = set()
    if acls_on(ctx):
        if denied(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
            return add_partitions_answer(ctx, {tp: TXN_DENIED for tp in wanted})
        names = {topic for topic, _ in wanted}
        refused = (names & INTERNAL_TOPICS) | unauthorized(ctx, WRITE, TOPIC, names - INTERNAL_TOPICS)
    unknown = {tp for tp in wanted if tp[0] not in refused and ctx.broker.logs.partition(*tp) is None}
    if unknown or refused:
        # as Kafka: nothing is added; the failed ones say why, the others OPERATION_NOT_ATTEMPTED
        errors = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in refused else
                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}
    else:
        result = await ctx.broker.transactions.add_partitions(
            transactional_id, request.v3_and_below_producer_id, request.v3_and_below_producer_epoch, wanted)
        errors = {tp: result.error for tp in wanted}
    return add_partitions_answer(ctx, errors)


def add_partitions_answer(ctx, errors: dict[tuple[str, int], ErrorCode]) -> dict:
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition,
                                               "partition_error_code": answer(ctx, error)})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]}


async def add_partitions_from_broker(ctx, request) -> dict:
    """AddPartitionsToTxn v4+: a partition leader's batch of transactions (KIP-890), each either
    verified (``verify_only``: the partitions must be in its open transaction) or, transactions
    v2's implicit add, added.  Needs CLUSTER_ACTION on the cluster, else the top-level error
    CLUSTER_AUTHORIZATION_FAILED, as Kafka."""
    if ctx.broker.acls.enabled and not authz.on_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "results_by_transaction": []}
    results = []
    for txn in request.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            codes = [await verify_in_transaction(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, tp)
                     for tp in wanted]
        else:
            result = await ctx.broker.transactions.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted, tv2=True)
            codes = [result.error] * len(wanted)
        by_topic: dict[str, list] = {}
        for (topic, partition), code in zip(wanted, codes):
            by_topic.setdefault(topic, []).append({"partition_index": partition,
                                                   "partition_error_code": int(code)})
        results.append({"transactional_id": txn.transactional_id, "topic_results": [
            {"name": topic, "results_by_partition": parts} for topic, parts in by_topic.items()]})
    return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": results}


@handles(25, 0, 4)
async def handle_add_offsets_to_txn(ctx, request):
    if denied(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": int(TXN_DENIED)}
    if denied(ctx, READ, GROUP, request.group_id):
        return {"throttle_time_ms": 0, "error_code": int(ErrorCode.GROUP_AUTHORIZATION_FAILED)}
    result = await ctx.broker.transactions.add_offsets(request.transactional_id, request.producer_id,
                                                       request.producer_epoch, request.group_id)
    return {"throttle_time_ms": 0, "error_code": answer(ctx, result.error)}


@handles(26, 0, 5)
async def handle_end_txn(ctx, request):
    """EndTxn; v5 is transactions v2's (KIP-890 part 2): the epoch is bumped and the answer
    carries the producer id and epoch of the next transaction."""
    if denied(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return {"throttle_time_ms": 0, "error_code": int(TXN_DENIED), "producer_id": -1, "producer_epoch": -1}
    result = await ctx.broker.transactions.end_txn(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, bool(request.committed),
                                                   tv2=uses_tv2(ctx))
    ok = result.error == ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": answer(ctx, result.error),
            "producer_id": result.producer_id if ok else -1, "producer_epoch": result.producer_epoch if ok else -1}


@handles(27, 1, 2)
async def handle_write_txn_markers(ctx, request):
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            parts = []
            for partition in topic.partition_indexes:
                code = await ctx.broker.transactions.write_marker_here(
                    topic.name, partition, marker.producer_id, marker.producer_epoch,
                    bool(marker.transaction_result), marker.coordinator_epoch)
                parts.append({"partition_index": partition, "error_code": int(code)})
            topics.append({"name": topic.name, "partitions": parts})
        results.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": results}


@handles(28, 0, 5)
async def handle_txn_offset_commit(ctx, request):
    refused: set[str] = set()
    if acls_on(ctx):
        error = None
        if denied(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
            error = TXN_DENIED
        elif denied(ctx, READ, GROUP, request.group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if error is not None:
            return {"throttle_time_ms": 0, "topics": [
                {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": int(error)}
                                                for p in t.partitions]} for t in request.topics]}
        refused = unauthorized(ctx, READ, TOPIC, [t.name for t in request.topics])
    offsets = [OffsetCommit(t.name, p.partition_index, p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
               for t in request.topics if t.name not in refused for p in t.partitions]
    errors = await commit_txn_offsets(ctx, request, offsets) if offsets or not refused else []
    by_topic: dict[str, list] = {}
    for commit, error in zip(offsets, errors):
        by_topic.setdefault(commit.topic, []).append({"partition_index": commit.partition,
                                                      "error_code": int(error)})
    for t in request.topics:
        if t.name in refused:
            by_topic.setdefault(t.name, []).extend(
                {"partition_index": p.partition_index, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)}
                for p in t.partitions)
    return {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


async def commit_txn_offsets(ctx, request, offsets: list[OffsetCommit]) -> list[ErrorCode]:
    """The group coordinator's errors for ``offsets`` (each), after Kafka 3.6+'s verification."""
    groups = ctx.broker.groups
    try:
        await groups.offsets_topic()        # in a cluster: COORDINATOR_NOT_AVAILABLE while being created
        groups.check_owner(request.group_id)
        if uses_tv2(ctx):               # transactions v2: the group's partition joins implicitly
            error = await add_implicitly(ctx, request.transactional_id, request.producer_id,
                                         request.producer_epoch, (OFFSETS_TOPIC, groups.partition_of(request.group_id)))
        else:
            error = await verify_txn_offset_commit(ctx, request)
        if error != ErrorCode.NONE:
            return [error] * len(offsets)
        return await groups.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "generation_id", -1), getattr(request, "member_id", "") or "",
            getattr(request, "group_instance_id", None), offsets)
    except KafkaApiError as exc:            # NOT_COORDINATOR: the group is coordinated elsewhere
        return [exc.code] * len(offsets)


async def verify_txn_offset_commit(ctx, request) -> ErrorCode:
    """Kafka 3.6+'s transaction verification of a TxnOffsetCommit (KIP-890 part 1), before the
    group coordinator holds the offsets pending for the producer: the producer must be the
    transactional id's current one, with a transaction open that AddOffsetsToTxn gave the
    group's ``__consumer_offsets`` partition.  Without it, offsets of a fenced zombie or of a
    producer id nobody initialised wait pending under that producer id, and a later COMMIT
    marker of the same producer id (the zombie's successor keeps it, with a bumped epoch)
    makes them count.

    Codes as Kafka's AddPartitionsToTxnManager hands them to a TxnOffsetCommit client:
    INVALID_REQUEST (empty id), INVALID_PRODUCER_ID_MAPPING (unknown id, or another producer
    id), INVALID_PRODUCER_EPOCH (fenced: PRODUCER_FENCED from the coordinator),
    CONCURRENT_TRANSACTIONS (being decided), INVALID_TXN_STATE (the group's partition is not in
    the transaction: Kafka's TRANSACTION_ABORTABLE, which kwire's codes lack), the coordinator's
    NOT_COORDINATOR/COORDINATOR_LOAD_IN_PROGRESS, and COORDINATOR_LOAD_IN_PROGRESS when the
    coordinator broker cannot be asked (Kafka's NETWORK_EXCEPTION mapping: the client retries).
    In a cluster the id's coordinator may be another broker: it is asked with
    DescribeTransactions.  Never raises KafkaApiError; ``__consumer_offsets`` must exist."""
    return await verify_in_transaction(ctx, request.transactional_id, request.producer_id, request.producer_epoch,
                                       (OFFSETS_TOPIC, ctx.broker.groups.partition_of(request.group_id)))


async def verify_in_transaction(ctx, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                tp: tuple[str, int]) -> ErrorCode:
    """Whether ``producer_id``/``producer_epoch`` is the transactional id's current producer
    with a transaction open that holds ``tp`` (Kafka 3.6+'s verification; codes in
    ``verify_txn_offset_commit``).  Never raises KafkaApiError."""
    if not transactional_id:
        return ErrorCode.INVALID_REQUEST
    d = ctx.broker.transactions.describe_transactions([transactional_id])[0]
    if d.error == ErrorCode.NOT_COORDINATOR:       # asked of the broker coordinating it (a cluster)
        d = await ctx.broker.topology.describe_elsewhere(transactional_id, d)
    if d.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND or (
            d.error == ErrorCode.NONE and d.producer_id != producer_id):
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if d.error != ErrorCode.NONE:
        return d.error
    if d.producer_epoch != producer_epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if d.state in ("PrepareCommit", "PrepareAbort"):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if tp[1] not in dict(d.topics).get(tp[0], ()):
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE


# Kafka's mapping of the coordinator's answer to an implicit add, for the request that caused it
# (AddPartitionsToTxnManager, then ReplicaManager): a fenced producer is INVALID_PRODUCER_EPOCH;
# what the client should simply retry is NOT_ENOUGH_REPLICAS, which every client retries.
_IMPLICIT_ADD_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
}


async def add_implicitly(ctx, transactional_id: str | None, producer_id: int, producer_epoch: int,
                         tp: tuple[str, int]) -> ErrorCode:
    """Transactions v2's implicit AddPartitionsToTxn of ``tp`` (a Produce v12's partition, a
    TxnOffsetCommit v5's ``__consumer_offsets`` partition) to the producer's transaction, at
    its coordinator; the code for the request that caused it.  Never raises KafkaApiError."""
    if not transactional_id:
        return ErrorCode.INVALID_REQUEST
    try:
        code = await ctx.broker.transactions.add_implicitly(transactional_id, producer_id, producer_epoch, [tp])
    except KafkaApiError as exc:
        code = exc.code
    return _IMPLICIT_ADD_ERRORS.get(code, code)
