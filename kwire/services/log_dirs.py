"""AlterReplicaLogDirs (KIP-113): moving a partition between this broker's log dirs while it
is served, one task per move (the copy itself: kwire.log.relocation).

A move copies batches from the current log into the new dir at most
``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's throttle of its
ReplicaAlterLogDirsThread; dynamic), and switches once the copy has caught up, between
two appends.  Asking for the dir a partition is in cancels its move; asking for another
dir restarts it there.  DescribeLogDirs shows a move as the "future" replica in its
destination, with its offset lag (kwire.handlers.log_dirs).
"""
from __future__ import annotations

import contextlib
import logging
import os

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError
from kwire.log.relocation import RESTART, Busy, LogMove
from kwire.runtime.blocking import run_blocking

logger = logging.getLogger("kwire.log_dirs")

TopicPartition = tuple[str, int]
CHUNK = 1 << 20          # bytes copied per step


class LogDirMover:
    def __init__(self, broker):
        self.broker = broker
        self.moves: dict[TopicPartition, LogMove] = {}
        self._scopes: dict[TopicPartition, trio.CancelScope] = {}
        self._nursery = None

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def alter(self, topic: str, partition: int, dest: str) -> ErrorCode:
        """Move (or keep) ``topic``-``partition`` in log dir ``dest``: NONE,
        LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION, REPLICA_NOT_AVAILABLE (not a replica
        here: as Kafka, its log is created in ``dest`` if it becomes one) or
        KAFKA_STORAGE_ERROR (the partition is offline).  No await."""
        logs = self.broker.logs
        dest = os.path.abspath(dest)
        if dest not in logs.log_dirs:
            return ErrorCode.LOG_DIR_NOT_FOUND
        plog = logs.partition(topic, partition)
        if plog is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if plog.absent:
            logs.preferred_dirs[(topic, partition)] = dest
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if not self.broker.partitions.hosts(topic, partition):
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if plog.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        tp = (topic, partition)
        current = self.moves.get(tp)
        if current is not None and current.dest_dir == dest:
            return ErrorCode.NONE
        if current is not None:
            self._scopes[tp].cancel()          # a new destination, or back home: this one is abandoned
        if os.path.dirname(plog.path) == dest:
            return ErrorCode.NONE
        move = self.moves[tp] = LogMove(plog, dest)
        scope = self._scopes[tp] = trio.CancelScope()
        self._nursery.start_soon(self._move, tp, move, scope)
        return ErrorCode.NONE

    def cancel(self, tp: TopicPartition) -> None:
        """Abandon the move of ``tp``, if any (its replica is being deleted)."""
        scope = self._scopes.get(tp)
        if scope is not None:
            scope.cancel()

    def future_of(self, plog) -> LogMove | None:
        """The move of ``plog`` in progress, once its copy exists."""
        for move in self.moves.values():
            if move.plog is plog and move.future is not None:
                return move
        return None

    async def _move(self, tp: TopicPartition, move: LogMove, scope: trio.CancelScope) -> None:
        done = False
        try:
            with scope:
                done = await self._copy(tp, move)
        except (OSError, KafkaApiError) as exc:
            logger.error("%s-%d: moving to %s failed: %s", tp[0], tp[1], move.dest_dir, exc)
        finally:
            if self.moves.get(tp) is move:
                del self.moves[tp]
                del self._scopes[tp]
            with trio.CancelScope(shield=True):
                await run_blocking(move.delete_old if done else move.abandon)

    async def _copy(self, tp: TopicPartition, move: LogMove) -> bool:
        clock, plog = self.broker.clock, move.plog
        await run_blocking(move.create, clock.now_ms())
        logger.info("%s-%d: copying to %s (%d offsets)", tp[0], tp[1], move.dest_dir, move.lag)
        while True:
            if plog.offline or move.future.offline:
                raise KafkaApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"{plog.path}: offline")
            copied = move.copy(CHUNK, clock.now_ms())
            if copied == RESTART:
                await run_blocking(move.restart)
                continue
            if move.lag == 0:                   # caught up, and no await since: switch now
                try:
                    async with self._partition_lock(tp):
                        if move.lag == 0:
                            move.take_over(clock.now_ms())
                            return True
                except Busy:
                    pass
                await trio.sleep(0.05)
                continue
            rate = self.broker.config.value_of("replica.alter.log.dirs.io.max.bytes.per.second")
            if copied:
                await trio.sleep(copied / rate if rate < (1 << 62) else 0)
            else:
                await trio.sleep(0.05)
            if move.future.flush_due(clock.now_ms()):
                await run_blocking(move.future.flush, clock.now_ms())

    def _partition_lock(self, tp: TopicPartition):
        """In a cluster, the partition's role lock: no follower truncation during the switch."""
        cluster = self.broker.cluster
        return cluster.replicas.lock(tp) if cluster is not None else _no_lock()


@contextlib.asynccontextmanager
async def _no_lock():
    yield
