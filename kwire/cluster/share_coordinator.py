"""The share coordinator and the persister of a cluster broker (KIP-932).

The **share coordinator** of a share-partition (group, topic id, partition) is the leader of
its ``__share_group_state`` partition (``kwire.services.share_state.state_partition``: the
layout the single node writes).  ``ShareStateStore`` is that coordinator on this broker: it
holds the latest ``ShareState`` of every key of the state partitions it leads, loaded by
replaying a partition when it becomes its leader and dropped when it stops (NOT_COORDINATOR
to callers, who find the new one and retry).  A write appends a ``ShareSnapshot`` record and
waits for the ISR (as the transaction coordinator does) before it answers.

The **share-partition leader** (the data partition's leader, ``kwire.services.shares`` with
``kwire.cluster.share_states.PersistedShareStates``) reads and writes that state through
``Persister``: locally when it is the share coordinator, otherwise by the persister RPCs
ReadShareGroupState (84), WriteShareGroupState (85) and DeleteShareGroupState (86) sent
broker-to-broker (served by ``kwire.handlers.share_state``).

Simplifications against Kafka: every write carries the share-partition's whole state (a
snapshot: Kafka's leader sends the changed batches, its coordinator writes ShareUpdate
records and snapshots now and then); a share-partition is initialized by its first write
(InitializeShareGroupState is served but the leader does not send it); a write whose leader
epoch is older than the state's is refused (FENCED_LEADER_EPOCH), and a read with a newer
epoch raises the state's (in memory), which fences a demoted leader still running; a write
whose state epoch is older than the state's is refused (FENCED_STATE_EPOCH): the state was
set afresh by Alter/DeleteShareGroupOffsets since the leader loaded it.
"""
from __future__ import annotations

import logging

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.internal_topics import SHARE_STATE, SHARE_STATE_TOPIC
from kwire.groups.share_records import (SNAPSHOT_KEY, ShareState, StateBatch, decode_key, decode_value,
                                        encode_key, encode_snapshot)

from kwire.runtime.blocking import run_blocking
from kwire.services.groups import records_to_end
from kwire.services.share_state import Key, merge_update, state_partition
from kwire.transport.peer import PeerError

logger = logging.getLogger("kwire.share")

REPLICATION_WAIT_S = 10.0
RETRY_S = 20.0                   # how long the persister keeps finding the share coordinator
RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
             ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


class ShareStateStore:
    """The share coordinator of this broker: the state of the keys of the led partitions."""

    def __init__(self, broker):
        self.broker = broker
        self.owned: set[int] = set()
        self.states: dict[Key, ShareState] = {}
        self._lock = trio.Lock()

    @property
    def cluster(self):
        return self.broker.cluster

    def _partitions(self) -> int:
        topic = self.broker.logs.get(SHARE_STATE_TOPIC)
        return len(topic.partitions) if topic is not None else 0

    def follow_leadership(self, led: set[int]) -> None:
        """Drop the state of the partitions led elsewhere now; load the newly led ones."""
        n = self._partitions()
        lost = self.owned - led
        if lost:
            for key in [k for k in self.states if state_partition(k, n) in lost]:
                del self.states[key]
            logger.info("%s partitions %s: no longer their share coordinator", SHARE_STATE_TOPIC, sorted(lost))
        gained = led - self.owned
        self.owned = set(led)
        topic = self.broker.logs.get(SHARE_STATE_TOPIC)
        for p in sorted(gained):
            count = 0
            for batch, record in records_to_end(topic.partitions[p]):
                if batch.is_control_batch or record.key is None:
                    continue
                k = decode_key(record.key)
                if k is None:
                    continue
                key = (k.group_id, k.topic_id, k.partition)
                count += 1
                if record.value is None:
                    self.states.pop(key, None)
                elif k.kind == SNAPSHOT_KEY:
                    self.states[key] = decode_value(k.kind, record.value)
                elif key in self.states:                  # a ShareUpdate (Kafka's): on top of the snapshot
                    self.states[key] = merge_update(self.states[key], decode_value(k.kind, record.value))
            logger.info("%s-%d: share coordinator (%d record(s) loaded)", SHARE_STATE_TOPIC, p, count)

    def _check(self, key: Key) -> int:
        n = self._partitions()
        p = state_partition(key, n) if n else -1
        if p not in self.owned:
            raise KafkaApiError(ErrorCode.NOT_COORDINATOR, f"not the share coordinator of {key}")
        return p

    def read(self, key: Key, leader_epoch: int) -> ShareState | None:
        """The state of ``key`` (None: none yet).  Raises KafkaApiError(NOT_COORDINATOR,
        FENCED_LEADER_EPOCH)."""
        self._check(key)
        state = self.states.get(key)
        if state is not None and leader_epoch >= 0:
            if leader_epoch < state.leader_epoch:
                raise KafkaApiError(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} < {state.leader_epoch}")
            if leader_epoch > state.leader_epoch:
                self.states[key] = ShareState(state.snapshot_epoch, state.state_epoch, leader_epoch,
                                              state.start_offset, state.batches)
        return self.states.get(key)

    async def write(self, key: Key, state: ShareState | None) -> ErrorCode:
        """Persist ``state`` (None: delete) as the state of ``key`` once the ISR has it."""
        async with self._lock:
            try:
                p = self._check(key)
            except KafkaApiError as exc:
                return exc.code
            old = self.states.get(key)
            if state is not None and old is not None and 0 <= state.leader_epoch < old.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if state is not None and old is not None and state.state_epoch < old.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH          # its offsets were altered since
            plog = self.broker.logs.get(SHARE_STATE_TOPIC).partitions[p]
            now = self.broker.clock.now_ms()
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                                producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
            builder.append(0, timestamp=now, key=encode_key(SNAPSHOT_KEY, *key),
                           value=None if state is None else encode_snapshot(state), headers=[])
            tp = (SHARE_STATE_TOPIC, p)
            replicas = self.cluster.replicas
            try:
                leader = replicas.check_leader(tp, plog, None)
                result = plog.append(bytes(builder.build()), now_ms=now, built_here=True)
                if result.needs_flush:
                    await run_blocking(plog.flush)
            except KafkaApiError as exc:
                return exc.code
            if state is None:
                self.states.pop(key, None)
            else:
                self.states[key] = state
            replicas.after_append(tp)
            self.broker.notify_appended([tp])            # wake the followers' parked fetches
        return await replicas.wait_replicated(tp, leader, result.last_offset + 1,
                                              trio.current_time() + REPLICATION_WAIT_S)


class Persister:
    """The share-partition leader's side: read, write and delete the state of a
    share-partition at its share coordinator (this broker's store, or another broker's by RPC)."""

    def __init__(self, broker, store: ShareStateStore):
        self.broker = broker
        self.store = store
        self._peers: dict[int, tuple] = {}          # broker id -> (PeerConnection, trio.Lock)

    async def read(self, key: Key, leader_epoch: int) -> ShareState | None:
        return await self._retrying(key, lambda coordinator: self._read_once(coordinator, key, leader_epoch))

    async def write(self, key: Key, state: ShareState | None) -> None:
        await self._retrying(key, lambda coordinator: self._write_once(coordinator, key, state))

    async def _retrying(self, key: Key, once):
        """Find the share coordinator of ``key`` and run ``once`` there, again after a retriable
        error until RETRY_S; raises KafkaApiError."""
        deadline = trio.current_time() + RETRY_S
        while True:
            code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "no share coordinator"
            coordinator = await self._coordinator(key)
            if coordinator is not None:
                try:
                    return await once(coordinator)
                except KafkaApiError as exc:
                    code, message = exc.code, exc.message
                except PeerError as exc:
                    code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
                    await self._drop_peer(coordinator)
            if code not in RETRIABLE or trio.current_time() >= deadline:
                raise KafkaApiError(code, f"share state of {key}: {message}")
            logger.debug("share state of %s: %s, retrying", key, message)
            await trio.sleep(0.2)

    async def _coordinator(self, key: Key) -> int | None:
        cluster = self.broker.cluster
        snap = cluster.snapshot
        if snap is None:
            return None
        if SHARE_STATE_TOPIC not in snap.topics:
            try:
                await cluster.ensure_internal_topic(SHARE_STATE)
            except KafkaApiError as exc:
                logger.info("%s not created: %s", SHARE_STATE_TOPIC, exc.message)
            return None
        n = len(snap.topics[SHARE_STATE_TOPIC].assignment)
        state = snap.states.get((SHARE_STATE_TOPIC, state_partition(key, n)))
        return None if state is None or state.leader < 0 else state.leader

    # -- one attempt --------------------------------------------------------------------
    async def _read_once(self, coordinator: int, key: Key, leader_epoch: int) -> ShareState | None:
        if coordinator == self.broker.node_id:
            return self.store.read(key, leader_epoch)
        group_id, topic_id, partition = key
        response = await self._request(coordinator, 84, group_id=group_id, topics=[{
            "topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": leader_epoch}]}])
        p = response.results[0].partitions[0]
        if p.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if p.error_code:
            raise KafkaApiError(ErrorCode(p.error_code), p.error_message or "")
        if p.start_offset < 0:           # no state yet (the coordinator answers start offset -1)
            return None
        return ShareState(0, p.state_epoch, leader_epoch, p.start_offset, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))

    async def _write_once(self, coordinator: int, key: Key, state: ShareState | None) -> None:
        if coordinator == self.broker.node_id:
            code = await self.store.write(key, state)
            if code:
                raise KafkaApiError(code, f"share state of {key} not written")
            return
        group_id, topic_id, partition = key
        if state is None:
            response = await self._request(coordinator, 86, group_id=group_id, topics=[{
                "topic_id": topic_id, "partitions": [{"partition": partition}]}])
        else:
            response = await self._request(coordinator, 85, group_id=group_id, topics=[{
                "topic_id": topic_id, "partitions": [{
                    "partition": partition, "state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                    "start_offset": state.start_offset,
                    "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                       "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                                      for b in state.batches]}]}])
        p = response.results[0].partitions[0]
        if p.error_code:
            raise KafkaApiError(ErrorCode(p.error_code), p.error_message or "")

    async def _request(self, broker_id: int, api_key: int, **fields):
        entry = self._peers.get(broker_id)
        if entry is None:
            conn = await self.broker.cluster.open_peer(broker_id, f"kwire-share-{self.broker.node_id}",
                                                       REPLICATION_WAIT_S)
            entry = self._peers.setdefault(broker_id, (conn, trio.Lock()))
            if entry[0] is not conn:
                await conn.aclose()
        conn, lock = entry
        async with lock:               # one request in flight per connection
            try:
                return await conn.request(api_key, 0, **fields)
            except BaseException:
                if self._peers.get(broker_id) is entry:
                    del self._peers[broker_id]
                with trio.CancelScope(shield=True):
                    await conn.aclose()
                raise

    async def _drop_peer(self, broker_id: int) -> None:
        entry = self._peers.pop(broker_id, None)
        if entry is not None:
            await entry[0].aclose()
