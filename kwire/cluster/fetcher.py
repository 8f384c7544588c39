"""Replication on the follower's side: one fetcher task per source broker.

A follower copies its leader's log with Kafka's own protocol:

1. Truncation (KIP-101/279): before fetching a partition it asks the leader,
   with OffsetForLeaderEpoch, where the follower's latest leader epoch ends in
   the leader's log, and truncates its own log there.  With no epoch in
   common it truncates to its high watermark.  Replicas therefore never
   diverge, even after an unclean or fast failover.
2. Fetch with ``replica_id`` = this broker's id and ``current_leader_epoch`` =
   the epoch the follower knows; the batches come back with offsets and
   epochs stamped and are appended unchanged (``append_as_follower``).  The
   follower's high watermark is min(leader's high watermark, its own LEO).
   Its log start follows the leader's (DeleteRecords), up to that high
   watermark; retention runs on each replica by itself, as in Kafka.

A partition leaves its fetcher when the cluster node sees a new leader; an
epoch error from the leader (FENCED/UNKNOWN_LEADER_EPOCH, NOT_LEADER) parks the
partition until the new state arrives from ZooKeeper.  A leader that refuses the
follower (TOPIC_AUTHORIZATION_FAILED: its principal lacks CLUSTER_ACTION on the
cluster) parks it too, and the follower says so once at WARNING.

Connections go through ``connect`` (kwire.cluster.node.ClusterNode.open_peer): the
leader's inter-broker listener, with its TLS and SASL.

A partition that joins a fetcher (a new leader, or a new epoch) cuts short the
fetch parked at the leader (up to ``replica.fetch.wait.max.ms``): the request
is abandoned with its connection and the fetcher reconnects at once.  Without
that, a new leader's first ``acks=all`` write waited for the follower's old
long poll to end, and a controlled shutdown took up to a second to fail over.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Awaitable, Callable

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.groups.coordinator import java_hash_code

from kwire.runtime.blocking import run_blocking
from kwire.transport.peer import PeerConnection, PeerError

logger = logging.getLogger("kwire.cluster.fetcher")

FETCH_VERSION = 12
EPOCH_VERSION = 4
TopicPartition = tuple[str, int]
# Errors meaning the source broker is behind this follower's view of the partition (it
# does not lead it yet, or not in this epoch yet); FENCED_LEADER_EPOCH means this
# follower is behind, and the next state from ZooKeeper replaces its FollowState.
LEADER_BEHIND = {ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER}
LEADER_BEHIND_RETRY_S = 0.05
REFUSED = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
WAIT_FOR_METADATA = {ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                     ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ErrorCode.KAFKA_STORAGE_ERROR}


class _Interrupted(Exception):
    """A partition joined while a fetch was parked at the leader; its answer is abandoned."""


@dataclasses.dataclass
class FollowState:
    plog: object
    leader_epoch: int
    truncated: bool = False        # OffsetForLeaderEpoch done for this leader epoch
    parked_until: float = 0.0      # trio time: an epoch error waits for the next state
    refused: bool = False          # the leader refused this follower (logged once)


def fetcher_id(tp: TopicPartition, fetchers: int) -> int:
    """Which of ``fetchers`` (``num.replica.fetchers``) fetches ``tp`` from its leader: Kafka's
    ``AbstractFetcherManager.getFetcherId``, ``Utils.abs(31 * topic.hashCode() + partition) % n``."""
    n = (31 * java_hash_code(tp[0]) + tp[1]) & 0xFFFFFFFF
    n = n - (1 << 32) if n & 0x80000000 else n
    return (0 if n == -(1 << 31) else abs(n)) % max(1, fetchers)


class ReplicaFetcher:
    """Copies the partitions led by ``source_id`` into this broker's logs."""

    def __init__(self, node_id: int, source_id: int,
                 connect: Callable[[int, str, float], Awaitable[PeerConnection]], config, clock,
                 lock: Callable[[TopicPartition], trio.Lock], fetcher: int = 0, throttle=None):
        """``connect(broker_id, client_id, timeout_s)`` opens a connection or raises PeerError;
        ``lock(tp)`` is the partition's role lock (kwire.cluster.replication.ReplicaManager.lock)."""
        self.lock = lock
        self.throttle = throttle       # the broker's follower replication quota (kwire.cluster.throttles)
        self.node_id = node_id
        self.source_id = source_id
        self.client_id = f"broker-{node_id}-fetcher-{fetcher}"     # Kafka's fetcher threads' name
        self.connect = connect
        self.clock = clock
        self.wait_ms = config.value_of("replica.fetch.wait.max.ms")
        self.partition_max_bytes = config.value_of("replica.fetch.max.bytes")
        self.max_bytes = config.value_of("replica.fetch.response.max.bytes")
        self.backoff_s = config.value_of("replica.fetch.backoff.ms") / 1000
        self.timeout_s = config.value_of("replica.socket.timeout.ms") / 1000
        self.partitions: dict[TopicPartition, FollowState] = {}
        self._changed = trio.Event()
        self._in_flight: trio.CancelScope | None = None     # the parked fetch, while it waits
        self.cancel_scope = trio.CancelScope()

    def follow(self, tp: TopicPartition, plog, leader_epoch: int) -> None:
        """Fetch ``tp`` from this source in ``leader_epoch`` (truncating first when new)."""
        state = self.partitions.get(tp)
        if state is None or state.leader_epoch != leader_epoch:
            self.partitions[tp] = FollowState(plog, leader_epoch)
            self._changed.set()
            if self._in_flight is not None:
                self._in_flight.cancel()

    def forget(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def run(self) -> None:
        """Fetch until cancelled (``cancel_scope``); reconnects with back-off on errors."""
        with self.cancel_scope:
            while True:
                if not self._ready():
                    self._changed = trio.Event()
                    with trio.move_on_after(0.1):
                        await self._changed.wait()
                    continue
                try:
                    conn = await self.connect(self.source_id, self.client_id, self.timeout_s)
                except PeerError as exc:
                    logger.log(exc.log_level, "fetcher from broker %d: %s", self.source_id, exc)
                    await trio.sleep(self.backoff_s)
                    continue
                try:
                    while self._ready():
                        await self._truncate(conn)
                        await self._fetch(conn)
                except _Interrupted:
                    pass                   # the connection has an answer owed: start afresh
                except PeerError as exc:
                    logger.log(exc.log_level, "fetcher from broker %d: %s; reconnecting", self.source_id, exc)
                    await trio.sleep(self.backoff_s)
                finally:
                    await conn.aclose()

    def _ready(self) -> dict[TopicPartition, FollowState]:
        now = trio.current_time()
        return {tp: s for tp, s in self.partitions.items() if s.parked_until <= now}

    # -- truncation ------------------------------------------------------------------------
    async def _truncate(self, conn: PeerConnection) -> None:
        pending = {tp: s for tp, s in self._ready().items() if not s.truncated}
        if not pending:
            return
        by_topic: dict[str, list] = {}
        for (topic, partition), s in pending.items():
            latest = s.plog.latest_epoch()
            by_topic.setdefault(topic, []).append({
                "partition": partition, "current_leader_epoch": s.leader_epoch,
                "leader_epoch": -1 if latest is None else latest})
        response = await conn.request(23, EPOCH_VERSION, replica_id=self.node_id, topics=[
            {"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        for topic in response.topics:
            for p in topic.partitions:
                s = self.partitions.get((topic.topic, p.partition))
                if s is None or s is not pending.get((topic.topic, p.partition)):
                    continue
                await self._truncate_one((topic.topic, p.partition), s, p)

    async def _truncate_one(self, tp: TopicPartition, s: FollowState, p) -> None:
        code = ErrorCode(p.error_code)
        if code != ErrorCode.NONE:
            self._park(tp, s, code)
            return
        plog = s.plog
        done = True
        if p.leader_epoch < 0 or p.end_offset < 0:
            target = plog.high_watermark          # no epoch in common: keep what was committed
        else:
            own_epoch, own_end = plog.epoch_end_offset(p.leader_epoch)
            if own_epoch == p.leader_epoch:
                target = min(p.end_offset, own_end)
            elif own_end >= 0:
                # The leader's epoch is one this follower never had: cut back to where the
                # follower's own epoch below it ends, then ask again with that epoch (KIP-279).
                target = own_end
                done = target >= plog.log_end_offset
            else:
                target = min(p.end_offset, plog.log_end_offset)
        if target < plog.log_end_offset:
            async with self.lock(tp):
                if self.partitions.get(tp) is not s:
                    return               # this broker leads it now, or follows another epoch
                logger.info("%s-%d: truncating from %d to %d (leader epoch %d ends at %d)", tp[0],
                            tp[1], plog.log_end_offset, target, p.leader_epoch, p.end_offset)
                try:
                    await run_blocking(plog.truncate_to, target)
                except KafkaApiError as exc:
                    logger.error("%s-%d: truncation failed: %s", tp[0], tp[1], exc.message)
                    self._park(tp, s, exc.code)
                    return
        s.truncated = done

    def _park(self, tp: TopicPartition, s: FollowState, code: ErrorCode) -> None:
        if code in REFUSED and not s.refused:
            s.refused = True
            logger.warning("%s-%d: broker %d refuses to replicate to this broker (%s): its principal "
                           "needs CLUSTER_ACTION on the cluster (super.users, or an ACL)", tp[0], tp[1],
                           self.source_id, code.name)
        logger.debug("%s-%d: %s from broker %d; waiting for new state", tp[0], tp[1], code.name,
                     self.source_id)
        # The leader has not applied the state this follower already has (it learns it from
        # ZooKeeper at about the same time): ask again soon, not after replica.fetch.backoff.ms.
        delay = LEADER_BEHIND_RETRY_S if code in LEADER_BEHIND else max(self.backoff_s, 0.05)
        s.parked_until = trio.current_time() + delay
        s.truncated = False

    # -- fetching ---------------------------------------------------------------------------
    async def _fetch(self, conn: PeerConnection) -> None:
        ready = {tp: s for tp, s in self._ready().items() if s.truncated}
        if not ready:
            return
        throttle = self.throttle
        if throttle is not None and throttle.partitions:
            now_ms = self.clock.now_ms()
            ready = {tp: s for tp, s in ready.items() if not throttle.holds_back(tp, now_ms)}
            if not ready:               # all held back by follower.replication.throttled.rate
                await trio.sleep(self.wait_ms / 1000)
                return
        by_topic: dict[str, list] = {}
        for (topic, partition), s in ready.items():
            by_topic.setdefault(topic, []).append({
                "partition": partition, "current_leader_epoch": s.leader_epoch,
                "fetch_offset": s.plog.log_end_offset, "last_fetched_epoch": -1,
                "log_start_offset": s.plog.log_start_offset,
                "partition_max_bytes": self.partition_max_bytes})
        with trio.CancelScope() as self._in_flight:
            response = await conn.request(
                1, FETCH_VERSION, wait_s=self.wait_ms / 1000, replica_id=self.node_id,
                max_wait_ms=self.wait_ms, min_bytes=1, max_bytes=self.max_bytes, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
        interrupted, self._in_flight = self._in_flight.cancelled_caught, None
        if interrupted:
            raise _Interrupted
        if response.error_code:
            raise PeerError(f"fetch answered {ErrorCode(response.error_code).name}")
        flushes, restarts, starts = [], [], []
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                s = self.partitions.get(tp)
                if s is not None and s is ready.get(tp):
                    if throttle is not None and p.records and throttle.throttled(tp):
                        throttle.record(len(p.records), self.clock.now_ms())
                    self._apply(tp, s, p, flushes, restarts, starts)
        for plog in flushes:
            await run_blocking(plog.flush)
        for tp, s, offset in restarts:
            async with self.lock(tp):
                if self.partitions.get(tp) is s:     # still followed, never once led
                    await run_blocking(s.plog.truncate_fully_and_start_at, offset)
        for plog, offset in starts:
            await run_blocking(plog.write_log_start_offset, offset)
            plog.advance_log_start(offset)

    def _apply(self, tp: TopicPartition, s: FollowState, p, flushes: list, restarts: list,
               starts: list) -> None:
        code = ErrorCode(p.error_code)
        plog = s.plog
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and plog.log_end_offset < p.log_start_offset:
            # Behind the leader's log start (retention or DeleteRecords): start over there.
            restarts.append((tp, s, p.log_start_offset))
            return
        if code != ErrorCode.NONE:
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                s.truncated = False               # ahead of the leader: truncate again
            else:
                self._park(tp, s, code)
            return
        if p.records:
            try:
                result = plog.append_as_follower(p.records, now_ms=self.clock.now_ms())
            except KafkaApiError as exc:
                logger.error("%s-%d: follower append failed: %s", tp[0], tp[1], exc.message)
                self._park(tp, s, exc.code)
                return
            if result.needs_flush:
                flushes.append(plog)
        plog.update_high_watermark(min(p.high_watermark, plog.log_end_offset))
        # The leader's log start moved (DeleteRecords): follow, up to what is committed here.
        start = min(p.log_start_offset, plog.high_watermark)
        if start > plog.log_start_offset:
            starts.append((plog, start))
