"""The share-group state persister RPCs (KIP-932), served by the share coordinator
(``kwire.cluster.share_coordinator.ShareStateStore``) to share-partition leaders on other brokers:
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86), version 0, and ReadShareGroupStateSummary (87, versions 0-1).
WriteShareGroupState is served at versions 0-1: version 1 (Kafka 4.2) adds each partition's
DeliveryCompleteCount, which kwire does not keep: it always writes whole states, so the
count is computed from the state's batches when a summary is read (``delivery_complete_count``).
Cluster mode only (``zookeeper.connect`` set).

Each partition is answered on its own: NOT_COORDINATOR when this broker does not lead its
``__share_group_state`` partition (the caller finds the new leader and retries).  A read of a
share-partition without state answers state epoch 0, start offset -1 and no batches (a
summary: leader epoch -1 and delivery-complete count -1 too).  A summary reads the state
without a leader epoch check (it fences nothing, as it moves no leader epoch).
"""
from __future__ import annotations

import uuid

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.share_partition import delivery_complete_count
from kwire.groups.share_records import ShareState, StateBatch

from kwire.handlers.registry import handles
from kwire.services.shares import enabled


def cluster_enabled(config) -> bool:
    return enabled(config) and bool(config.value_of("zookeeper.connect"))


def _uuid(value) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


async def _each(request, answer, on_error=None) -> dict:
    results = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            try:
                fields = await answer((request.group_id, _uuid(t.topic_id), p.partition), p)
                parts.append(dict({"partition": p.partition, "error_code": 0, "error_message": None}, **fields))
            except KafkaApiError as exc:
                parts.append(dict({"partition": p.partition, "error_code": int(exc.code),
                                   "error_message": exc.message}, **(on_error or {})))
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


def _check_code(code: ErrorCode) -> dict:
    if code:
        raise KafkaApiError(code, None)
    return {}


@handles(83, 0, 0, enabled=cluster_enabled)
async def handle_initialize_share_group_state(ctx, request):
    store = ctx.broker.shares.store

    async def answer(key, p):
        return _check_code(await store.write(key, ShareState(0, p.state_epoch, -1, p.start_offset, ())))
    return await _each(request, answer)


@handles(84, 0, 0, enabled=cluster_enabled)
async def handle_read_share_group_state(ctx, request):
    store = ctx.broker.shares.store

    async def answer(key, p):
        state = store.read(key, p.leader_epoch)
        if state is None:
            return {"state_epoch": 0, "start_offset": -1, "state_batches": []}
        return {"state_epoch": state.state_epoch, "start_offset": state.start_offset,
                "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                   "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                  for b in state.batches]}
    return await _each(request, answer, {"state_epoch": -1, "start_offset": -1, "state_batches": []})


@handles(85, 0, 1, enabled=cluster_enabled)
async def handle_write_share_group_state(ctx, request):
    store = ctx.broker.shares.store

    async def answer(key, p):
        state = ShareState(0, p.state_epoch, p.leader_epoch, p.start_offset, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))
        return _check_code(await store.write(key, state))
    return await _each(request, answer)


@handles(87, 0, 1, enabled=cluster_enabled)
async def handle_read_share_group_state_summary(ctx, request):
    store = ctx.broker.shares.store

    async def answer(key, p):
        state = store.read(key, -1)
        if state is None:
            return {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1, "delivery_complete_count": -1}
        return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset, "delivery_complete_count": delivery_complete_count(state)}
    return await _each(request, answer, {"state_epoch": -1, "leader_epoch": -1, "start_offset": -1,
                                         "delivery_complete_count": -1})


@handles(86, 0, 0, enabled=cluster_enabled)
async def handle_delete_share_group_state(ctx, request):
    store = ctx.broker.shares.store

    async def answer(key, p):
        return _check_code(await store.write(key, None))
    return await _each(request, answer)
