"""Runs the sans-I/O transaction coordinator (kwire.groups.txn_coordinator) inside the Trio server.

Handlers make one call per API (``init_producer_id``, ``add_partitions``,
``add_offsets``, ``end_txn``).  Each call asks the coordinator, then drives the
result as its docstring says: the state record is appended to
``__transaction_state`` (and flushed when the topic's flush policy says so)
before the client is answered; when a transaction is decided, its COMMIT or
ABORT markers are appended to every partition it touched, including the
``__consumer_offsets`` partition of each group it committed offsets for (whose
pending offsets then count or vanish), then the Complete record is written.
Markers are written before the decision's request is answered, so a
read_committed consumer sees a committed transaction as soon as EndTxn
returns; a marker that cannot be written now (an offline partition) is
retried in the background while the id answers CONCURRENT_TRANSACTIONS.

Timeouts: a task sleeps until the coordinator's next deadline and aborts the
transactions open longer than their timeout (fencing their producers) and
forgets ids idle for ``transactional.id.expiration.ms``.

Start-up: ``__transaction_state`` is replayed; a transaction found decided but
not completed (a crash between the decision and its Complete record) has its
markers written again, which is harmless as markers are idempotent; one found
open is aborted when its timeout passes.

In a ZooKeeper cluster (``cluster`` set) the coordinator of a transactional id
is the leader of its ``__transaction_state`` partition (replicated with
``transaction.state.log.replication.factor``): partitions are loaded when this
broker becomes their leader, with the partition's leader epoch as coordinator
epoch, and unloaded when it stops; state records wait for the ISR (acks=all),
and markers for partitions led elsewhere go to their leaders in
WriteTxnMarkers requests.
"""
from __future__ import annotations

import logging

import trio
from kafka.record.default_records import DefaultRecordBatchBuilder

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.txn_coordinator import (
    TRANSACTION_STATE_TOPIC, TransactionCoordinator, TxnConfig, TxnDescription, TxnListing, TxnMarkers,
    TxnResult,
)

from kwire.groups.internal_topics import OFFSETS_TOPIC, TRANSACTIONS
from kwire.runtime.blocking import run_blocking
from kwire.runtime.clock import Clock
from kwire.services.groups import GroupService, records_to_end
from kwire.transport.peer import PeerError

logger = logging.getLogger("kwire.transactions")

MARKER_RETRY_S = 1.0
REPLICATION_WAIT_S = 5.0       # acks=all of a state record or marker, as Kafka's request timeout
# A stale marker (its producer or coordinator epoch moved on) is one nobody needs any more.
STALE_MARKER = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}


class TransactionService:
    """The transaction coordinator of one single-node broker."""

    def __init__(self, config, logs, clock: Clock, groups: GroupService, notify_appended):
        self.config = config
        self.logs = logs
        self.clock = clock
        self.groups = groups
        self.notify_appended = notify_appended
        self._reserved: int | None = None
        self.coordinator = TransactionCoordinator(self._take_producer_id, TxnConfig(
            transaction_max_timeout_ms=config.value_of("transaction.max.timeout.ms"),
            transactional_id_expiration_ms=config.value_of("transactional.id.expiration.ms"),
            num_partitions=config.value_of("transaction.state.log.num.partitions")))
        self._wakeup = trio.Event()
        self._pending: list[TxnMarkers] = []       # decided at start-up, or markers to retry
        self._lock = trio.Lock()                   # one request's writes at a time, in order
        self.cluster = None                        # a ClusterNode in cluster mode (set by the broker)
        # set by the broker when it is built, for its mode (kwire.services.partitions,
        # kwire.services.topic_admin, kwire.services.topology)
        self.partitions = None
        self.topic_admin = None
        self.topology = None
        self._timer_at: int | None = None          # when the timer task wakes next (None: not scheduled)

    # -- the internal topic ---------------------------------------------------
    async def state_topic(self):
        """``__transaction_state``, created (compacted, empty partitions loaded) on first use.
        Cluster mode: created through ZooKeeper; its partitions load as this broker leads them."""
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        if topic is None:           # a cluster's through ZooKeeper: COORDINATOR_NOT_AVAILABLE until here
            topic = await self.topic_admin.internal_topic(TRANSACTIONS)
        # a broker serving every partition coordinates every id; a cluster's follows leadership
        if self.partitions.serves_every_partition and not self.coordinator.owned_partitions():
            self.load()
        return topic

    def load(self) -> int:
        """Replay every partition of ``__transaction_state`` (to the log end); the transactions
        found decided but not completed are queued for the timer task.  Returns the record count."""
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return 0
        topic.internal = True
        count = 0
        for index, plog in enumerate(topic.partitions):
            count += self._load_partition(index, plog, plog.leader_epoch)
        if count:
            logger.info("replayed %d transaction record(s) from %s; %d transaction(s) to complete",
                        count, TRANSACTION_STATE_TOPIC, len(self._pending))
        if self._pending:
            self._wakeup.set()
        return count

    def _load_partition(self, index: int, plog, coordinator_epoch: int) -> int:
        """Replay one partition to its log end (a new leader's high watermark may lag it)."""
        self.coordinator.begin_load(index, coordinator_epoch)
        count = 0
        for batch, record in records_to_end(plog):
            if not batch.is_control_batch:
                self.coordinator.replay(record.key, record.value)
                count += 1
        self._pending.extend(self.coordinator.finish_load(index))
        return count

    def follow_leadership(self, led: dict[int, int]) -> None:
        """Cluster mode: coordinate the ids of the ``__transaction_state`` partitions this broker
        leads (``led``: partition -> leader epoch): unload the others, load the new ones."""
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        owned = self.coordinator.owned_partitions()
        for p, epoch in owned.items():
            if led.get(p) != epoch:
                self.coordinator.unload_partition(p)
        if topic is None:
            return
        topic.internal = True
        gained = [p for p, epoch in led.items() if owned.get(p) != epoch and p < len(topic.partitions)]
        for p in sorted(gained):
            count = self._load_partition(p, topic.partitions[p], led[p])
            logger.info("%s-%d: coordinating its transactional ids (%d record(s), coordinator epoch %d)",
                        TRANSACTION_STATE_TOPIC, p, count, led[p])
        if gained:
            self._wakeup.set()

    # -- one call per API ---------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> TxnResult:
        await self.state_topic()
        # taken only for a new id (or a rotation); an unused one is skipped
        self._reserved = await self.topology.next_producer_id()
        return await self._run(lambda now: self.coordinator.init_producer_id(
            transactional_id, timeout_ms, producer_id, producer_epoch, now_ms=now))

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions, *, tv2: bool = False) -> TxnResult:
        await self.state_topic()
        return await self._run(lambda now: self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, now, tv2=tv2))

    async def add_implicitly(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions) -> ErrorCode:
        """Transactions v2's implicit AddPartitionsToTxn, for a partition leader taking a
        Produce v12 or TxnOffsetCommit v5 of a transaction: this broker's coordinator when it
        owns the id, else the broker that does (AddPartitionsToTxn v5, as Kafka's
        AddPartitionsToTxnManager)."""
        result = await self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, tv2=True)
        if result.error != ErrorCode.NOT_COORDINATOR:
            return result.error
        return await self.topology.add_partitions_elsewhere(transactional_id, producer_id, producer_epoch,
                                                            partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> TxnResult:
        await self.state_topic()
        await self.groups.offsets_topic()
        partition = self.groups.partition_of(group_id)
        return await self._run(lambda now: self.coordinator.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id, partition, now))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool, *, tv2: bool = False) -> TxnResult:
        await self.state_topic()
        return await self._run(lambda now: self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, commit, now, tv2=tv2))

    # -- reads (DescribeTransactions, ListTransactions) ---------------------------------
    def describe_transactions(self, transactional_ids) -> list[TxnDescription]:
        """The coordinator's entries, in request order; reads only.  A single node that has not
        created ``__transaction_state`` yet knows no id (TRANSACTIONAL_ID_NOT_FOUND) rather than
        answering NOT_COORDINATOR for ids it would coordinate once the topic exists."""
        if self.partitions.serves_every_partition and self.logs.get(TRANSACTION_STATE_TOPIC) is None:
            return [TxnDescription(t, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND if t else ErrorCode.INVALID_REQUEST)
                    for t in transactional_ids]
        return self.coordinator.describe_transactions(transactional_ids)

    def list_transactions(self, state_filters=(), producer_id_filters=(), duration_filter_ms: int = -1) -> TxnListing:
        """The transactional ids this broker coordinates, filtered as ListTransactions asks; reads only."""
        return self.coordinator.list_transactions(state_filters, producer_id_filters, duration_filter_ms,
                                                  self.clock.now_ms())

    def _take_producer_id(self) -> int:
        if self._reserved is None:
            raise KafkaApiError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, "no producer id reserved")
        producer_id, self._reserved = self._reserved, None
        return producer_id

    # -- driving results -------------------------------------------------------------
    async def _run(self, call) -> TxnResult:
        async with self._lock:
            answer = await self._drive(call(self.clock.now_ms()))
        at = self.coordinator.next_deadline_ms()
        if self._pending or (at is not None and (self._timer_at is None or at < self._timer_at)):
            self._wakeup.set()      # a new transaction has the earliest timeout, or markers wait
        return answer

    async def _drive(self, result: TxnResult) -> TxnResult:
        """Append the result's state records, then write its markers and the Complete record;
        returns the result that answers the client (the one before the markers)."""
        result = await self._write_state(result)
        answer = result
        while result.markers is not None:
            markers = result.markers
            if not await self._write_markers(markers):
                self._pending.append(markers)      # retried by the timer task
                break
            result = await self._write_state(self.coordinator.markers_written(markers, self.clock.now_ms()))
        return answer

    async def _write_state(self, result: TxnResult) -> TxnResult:
        while result.write is not None:
            if result.backoff_ms:
                await trio.sleep(result.backoff_ms / 1000)
            write = result.write
            result = self.coordinator.write_done(write, await self._append_state(write), self.clock.now_ms())
        return result

    async def _append_state(self, write) -> ErrorCode:
        topic = self.logs.get(TRANSACTION_STATE_TOPIC)
        if topic is None or write.partition >= len(topic.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        plog = topic.partitions[write.partition]
        now = self.clock.now_ms()
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
        builder.append(0, timestamp=now, key=write.key, value=write.value, headers=[])
        return await self._append_replicated((TRANSACTION_STATE_TOPIC, write.partition), plog,
                                             lambda: plog.append(bytes(builder.build()), now_ms=now, built_here=True))

    async def _append_replicated(self, tp, plog, append) -> ErrorCode:
        """Run ``append`` (a PartitionLog append) as the partition's leader, flush as its policy
        says, and in a cluster wait for the ISR; the error code of the first step that failed."""
        partitions = self.partitions
        try:
            leader = partitions.check_writer(tp[0], tp[1], plog)     # NOT_LEADER_OR_FOLLOWER
            result = append()
            if result.needs_flush:
                await run_blocking(plog.flush)
        except KafkaApiError as exc:
            if exc.code not in STALE_MARKER:
                logger.warning("%s-%d: transaction record or marker not written: %s", tp[0], tp[1], exc.message)
            return exc.code
        required = partitions.coordinator_appended(tp, result)     # wakes the followers' parked fetches
        if required is None:
            return ErrorCode.NONE
        return await partitions.wait_committed(tp, required, trio.current_time() + REPLICATION_WAIT_S, leader)

    async def write_marker_here(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                                commit: bool, coordinator_epoch: int) -> ErrorCode:
        """Append one marker to a partition this broker leads (WriteTxnMarkers, or the
        coordinator's own partitions); a stale one (its epochs moved on) counts as written."""
        plog = self.logs.partition(topic, partition)
        if plog is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        code = await self._append_replicated((topic, partition), plog, lambda: plog.append_control(
            producer_id, producer_epoch, commit, coordinator_epoch, now_ms=self.clock.now_ms()))
        if code in STALE_MARKER:
            return ErrorCode.NONE
        if code == ErrorCode.NONE and topic == OFFSETS_TOPIC:
            self.groups.complete_txn(partition, producer_id, commit)
        self.notify_appended([(topic, partition)])       # read_committed fetches parked at the old LSO
        return code

    async def _write_markers(self, markers: TxnMarkers) -> bool:
        """Append the markers to every partition of the transaction, those led elsewhere through
        WriteTxnMarkers to their leaders; False if one could not be written (retried later: the
        others stay written, and markers are idempotent)."""
        remote: dict[int, list[tuple[str, int]]] = {}
        complete = True
        for topic, partition in markers.partitions:
            leader = self.topology.leader_id(topic, partition)
            if leader is None:
                continue                                  # a deleted topic: as Kafka, skipped
            if leader != -1 and leader != self.config.node_id:   # led by another broker of the cluster
                remote.setdefault(leader, []).append((topic, partition))
                continue
            code = await self.write_marker_here(topic, partition, markers.producer_id, markers.producer_epoch,
                                                markers.commit, markers.coordinator_epoch)
            complete = complete and code in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for broker_id, partitions in remote.items():
            complete = await self._send_markers(broker_id, markers, partitions) and complete
        return complete

    async def _send_markers(self, broker_id: int, markers: TxnMarkers, partitions) -> bool:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        try:
            conn = await self.cluster.open_peer(broker_id, f"kwire-txn-{self.cluster.node_id}", REPLICATION_WAIT_S)
            try:
                response = await conn.request(27, 2, markers=[{
                    "producer_id": markers.producer_id, "producer_epoch": markers.producer_epoch,
                    "transaction_result": markers.commit, "coordinator_epoch": markers.coordinator_epoch,
                    "transaction_version": markers.transaction_version,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}])
            finally:
                await conn.aclose()
        except PeerError as exc:
            logger.log(max(exc.log_level, logging.INFO), "WriteTxnMarkers to broker %d failed: %s", broker_id, exc)
            return False
        done = True
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if p.error_code not in (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        logger.info("%s-%d: marker not written by broker %d: %s", topic.name, p.partition_index,
                                    broker_id, ErrorCode(p.error_code).name)
                        done = False
        return done

    # -- timers -------------------------------------------------------------------
    async def run_timers(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Abort timed-out transactions, forget idle ids, finish what start-up or a failed
        marker left decided but not completed."""
        task_status.started()
        while True:
            self._wakeup = trio.Event()
            pending, self._pending = self._pending, []
            for markers in pending:
                async with self._lock:
                    if await self._write_markers(markers):
                        await self._write_state(self.coordinator.markers_written(markers, self.clock.now_ms()))
                    else:
                        self._pending.append(markers)
            async with self._lock:
                for result in self.coordinator.expired(self.clock.now_ms()):
                    await self._drive(result)
            at = self.coordinator.next_deadline_ms()
            wait_s = None if at is None else max(0.0, (at - self.clock.now_ms()) / 1000)
            if self._pending:
                wait_s = MARKER_RETRY_S if wait_s is None else min(wait_s, MARKER_RETRY_S)
            self._timer_at = None if wait_s is None else self.clock.now_ms() + int(wait_s * 1000)
            with trio.move_on_after(wait_s if wait_s is not None else float("inf")):
                await self._wakeup.wait()
