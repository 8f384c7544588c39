"""Replication on the leader's side: ISR, follower log end offsets, the high watermark, acks=all.

Kafka's rules (ZooKeeper-era ReplicaManager / Partition), as kept here:

* The leader learns a follower's log end offset (LEO) from the ``fetch_offset``
  of the follower's Fetch (``replica_id`` = its broker id), after checking the
  follower's ``current_leader_epoch``.
* The high watermark is the minimum LEO over the ISR (the leader's own LEO
  included).  It only moves forward; consumers read below it, ListOffsets
  latest returns it.
* A follower's fetch is validated before it counts (Kafka's
  ``followerReplicaOrThrow`` and read-then-``updateFollowerFetchState``): a
  replica id that is not an assigned replica gets NOT_LEADER_OR_FOLLOWER, and
  a fetch offset outside [log start, LEO] gets OFFSET_OUT_OF_RANGE; neither
  moves anything (``check_follower`` before the read, ``on_follower_fetch``
  after it).
* Caught up (Kafka's ``Replica.updateFetchState``): a follower is caught up as
  of a fetch that reached the leader's LEO, or as of its *previous* fetch when
  this one reached the LEO the leader had at that previous fetch.  Under
  continuous load a fetch never reaches the moving end, yet a follower that
  keeps fetching what was there a moment ago stays in sync.  A follower not
  caught up for ``replica.lag.time.max.ms`` (and not at the LEO) leaves the
  ISR; one outside the ISR whose LEO reaches the high watermark and the start
  of the leader's epoch joins it, unless it is in controlled shutdown or not
  registered in ZooKeeper (a broker whose session expired but still fetches
  across a one-way partition stays out).
* The leader writes ISR changes itself, as a conditional update of the
  partition's state znode (``write_isr``), so a deposed leader's write fails on
  the znode version and it stops acting as leader.  While a write is in flight,
  or its outcome is unknown (ZooKeeper's connection lost), the high watermark
  moves on the *maximal* ISR, the union of the old and the proposed one
  (Kafka's ``maximalIsr``): a replica being added must have the records before
  they count as committed, since ZooKeeper may already name it in the ISR.
  A state of the leader's own epoch read from ZooKeeper is taken only when its
  znode version is newer than the one the leader wrote (a snapshot read before
  that write must not roll the ISR back).
* Continuous leadership: a new leader epoch with the same leader (the
  controller removed a dead follower, for instance) keeps the waiting acks=all
  produces and the followers' positions, as Kafka keeps its delayed produces;
  only a change of leader answers them NOT_LEADER_OR_FOLLOWER.
* Role changes and a follower's truncation of the same partition are
  serialised by ``lock(tp)`` (Kafka's ``leaderIsrUpdateLock``): becoming leader
  waits for a truncation in a worker thread to finish, so the leader starts
  from the truncated log end, and a truncation re-checks under the lock that
  the partition is still followed, so it never cuts records appended as leader.
* ``acks=all`` waits until the high watermark passes the appended batch;
  ``min.insync.replicas`` is checked before the append (NOT_ENOUGH_REPLICAS)
  and again when the wait ends (NOT_ENOUGH_REPLICAS_AFTER_APPEND).

The follower's side (fetching, truncation) is in ``kwire.cluster.fetcher``.
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
from typing import Awaitable, Callable

import trio

from kwire.codecs.errors import ErrorCode, KafkaApiError

logger = logging.getLogger("kwire.cluster.replication")

TopicPartition = tuple[str, int]
# write_isr(tp, new_isr, leader_epoch, expected_version) -> the znode's new version, or None
# when the conditional update failed (the state moved on: this broker may no longer lead).
# Raises IsrWriteUnknown when the outcome cannot be known now.
WriteIsr = Callable[[TopicPartition, tuple[int, ...], int, int], Awaitable[int | None]]


class IsrWriteUnknown(Exception):
    """An ISR write whose outcome is unknown (ZooKeeper unreachable): it may have been applied."""


@dataclasses.dataclass
class LeaderState:
    """What the leader of one partition knows about its replicas."""
    plog: object
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    zk_version: int
    epoch_start_offset: int
    follower_leo: dict[int, int] = dataclasses.field(default_factory=dict)
    follower_start: dict[int, int] = dataclasses.field(default_factory=dict)   # their log start offsets
    caught_up_ms: dict[int, int] = dataclasses.field(default_factory=dict)
    # Kafka's lastFetchLeaderLogEndOffset / lastFetchTimeMs, per follower
    last_fetch_leader_leo: dict[int, int] = dataclasses.field(default_factory=dict)
    last_fetch_ms: dict[int, int] = dataclasses.field(default_factory=dict)
    # the ISR being written to ZooKeeper, or written with an unknown outcome; None when settled
    pending_isr: tuple[int, ...] | None = None
    pending_unknown: bool = False
    successor: "LeaderState | None" = None     # the next epoch of a continuous leadership
    hw_event: trio.Event = dataclasses.field(default_factory=trio.Event)
    # acks=all waiters, a heap of (offset the high watermark must reach, sequence, event): a
    # move of the high watermark wakes only those it satisfies, not every produce in flight
    acks_waiters: list = dataclasses.field(default_factory=list)


class ReplicaManager:
    """Leader-side replica state of every partition this broker leads.  Trio thread only."""

    def __init__(self, node_id: int, config, clock, notify_appended: Callable,
                 notify_committed: Callable, write_isr: WriteIsr):
        self.node_id = node_id
        self.lag_ms = config.value_of("replica.lag.time.max.ms")
        self.clock = clock
        self.notify_appended = notify_appended      # parked fetches of any kind
        self.notify_committed = notify_committed    # consumers' parked fetches (the high watermark moved)
        self.write_isr = write_isr
        self.leaders: dict[TopicPartition, LeaderState] = {}
        self.shutting_down: set[int] = set()     # brokers in controlled shutdown never rejoin an ISR
        self.live: set[int] | None = None        # registered brokers; only they (re)join an ISR
        self._isr_wake = trio.Event()
        self._sequence = itertools.count()
        self._locks: dict[TopicPartition, trio.Lock] = {}

    def lock(self, tp: TopicPartition) -> trio.Lock:
        """The lock that serialises role changes of ``tp`` with a follower's truncation of it."""
        lock = self._locks.get(tp)
        if lock is None:
            lock = self._locks[tp] = trio.Lock()
        return lock

    # -- role changes (from the cluster node, after reading ZooKeeper) ----------------
    def become_leader(self, tp: TopicPartition, plog, leader_epoch: int, replicas, isr,
                      zk_version: int) -> None:
        """Lead ``tp`` in ``leader_epoch`` (call under ``lock(tp)``).  For the epoch already led,
        only a newer znode version is taken (the leader's own writes move it).  Raises OSError
        if the epoch checkpoint cannot be written."""
        state = self.leaders.get(tp)
        if state is not None and state.leader_epoch == leader_epoch:
            self._refresh(tp, state, replicas, isr, zk_version)
            return
        if state is not None and leader_epoch < state.leader_epoch:
            return                       # an older state than the one led: a stale read
        plog.enable_replication()
        plog.set_leader_epoch(leader_epoch, plog.log_end_offset)
        plog.leader_epoch = leader_epoch
        now = self.clock.now_ms()
        new = LeaderState(plog, leader_epoch, tuple(replicas), tuple(isr), zk_version,
                          plog.log_end_offset,
                          caught_up_ms={r: now for r in isr if r != self.node_id})
        self.leaders[tp] = new
        if state is not None:
            # Continuous leadership (the controller bumped the epoch, this broker still leads):
            # followers keep their positions and the acks=all waiters keep waiting.
            for r in replicas:
                if r in state.follower_leo:
                    new.follower_leo[r] = state.follower_leo[r]
                if r in state.follower_start:
                    new.follower_start[r] = state.follower_start[r]
            new.acks_waiters, state.acks_waiters = state.acks_waiters, []
            state.successor = new
            state.hw_event.set()
        logger.info("%s-%d: leader in epoch %d, isr %s", tp[0], tp[1], leader_epoch, list(isr))
        self._advance_hw(tp, new)

    def _refresh(self, tp: TopicPartition, state: LeaderState, replicas, isr, zk_version: int) -> None:
        """The state znode of the epoch led, as just read: taken when newer than what this leader
        wrote; the same version settles a write of unknown outcome (it was not applied)."""
        state.replicas = tuple(replicas)
        if zk_version < state.zk_version:
            return
        if zk_version == state.zk_version:
            if state.pending_unknown:
                state.pending_isr, state.pending_unknown = None, False
            return
        if state.pending_unknown or state.pending_isr is None:
            state.pending_isr, state.pending_unknown = None, False
        now = self.clock.now_ms()
        for r in isr:
            if r not in state.isr:
                state.caught_up_ms[r] = now
        state.isr, state.zk_version = tuple(isr), zk_version
        self._advance_hw(tp, state)
        self._wake(state)

    def stop_leading(self, tp: TopicPartition) -> None:
        """No longer the leader of ``tp``: wake its acks=all waiters (they answer NOT_LEADER)."""
        state = self.leaders.pop(tp, None)
        if state is not None:
            state.hw_event.set()
            self._release_acks(state)
            self.notify_appended([tp])

    def leader(self, tp: TopicPartition) -> LeaderState | None:
        return self.leaders.get(tp)

    # -- fetch and produce hooks ------------------------------------------------------
    def check_leader(self, tp: TopicPartition, plog, current_leader_epoch: int | None) -> LeaderState:
        """The leader state of ``tp``.  As Kafka's Partition: the client's epoch is checked
        against the epoch this broker knows (leader or follower) first, then leadership.
        Raises KafkaApiError(FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER)."""
        if plog.absent:                 # no replica here: Kafka answers without looking at epochs
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                f"this broker holds no replica of {tp[0]}-{tp[1]}")
        if current_leader_epoch is not None and current_leader_epoch >= 0:
            if current_leader_epoch < plog.leader_epoch:
                raise KafkaApiError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > plog.leader_epoch:
                raise KafkaApiError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        state = self.leaders.get(tp)
        if state is None:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                f"this broker is not the leader of {tp[0]}-{tp[1]}")
        return state

    def check_min_isr(self, tp: TopicPartition, state: LeaderState) -> None:
        """Before an acks=all append; raises KafkaApiError(NOT_ENOUGH_REPLICAS)."""
        needed = state.plog.config.min_insync_replicas
        if len(state.isr) < needed:
            raise KafkaApiError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                f"The size of the current ISR {list(state.isr)} is insufficient to "
                                f"satisfy the min.isr requirement of {needed} for partition {tp[0]}-{tp[1]}")

    def after_append(self, tp: TopicPartition) -> None:
        """The leader's LEO moved: with a one-member ISR the high watermark follows at once."""
        state = self.leaders.get(tp)
        if state is not None:
            self._advance_hw(tp, state)

    def check_follower(self, state: LeaderState, replica_id: int) -> None:
        """Before a follower's fetch is read: only assigned replicas fetch as followers.
        Raises KafkaApiError(NOT_LEADER_OR_FOLLOWER)."""
        if replica_id not in state.replicas or replica_id == self.node_id:
            raise KafkaApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                f"broker {replica_id} is not a follower of this partition "
                                f"(replicas {list(state.replicas)})")

    def on_follower_fetch(self, tp: TopicPartition, state: LeaderState, replica_id: int,
                          fetch_offset: int, log_start_offset: int = -1) -> None:
        """After a follower's fetch was read without error (``check_follower`` passed, the
        offset was in range): record its LEO and log start; may move the high watermark and
        ask for an ISR expansion."""
        if replica_id not in state.replicas:
            return
        plog = state.plog
        now = self.clock.now_ms()
        leo = plog.log_end_offset
        state.follower_leo[replica_id] = fetch_offset
        if log_start_offset > state.follower_start.get(replica_id, -1):
            state.follower_start[replica_id] = log_start_offset
            self._wake(state)
        caught = state.caught_up_ms.get(replica_id, -1)
        if fetch_offset >= leo:
            caught = max(caught, now)
        elif fetch_offset >= state.last_fetch_leader_leo.get(replica_id, leo + 1):
            caught = max(caught, state.last_fetch_ms[replica_id])
        if caught >= 0:
            state.caught_up_ms[replica_id] = caught
        state.last_fetch_leader_leo[replica_id] = leo
        state.last_fetch_ms[replica_id] = now
        if replica_id not in state.isr and self._eligible(state, replica_id):
            self._isr_wake.set()
        self._advance_hw(tp, state)

    async def wait_replicated(self, tp: TopicPartition, state: LeaderState, required: int,
                              deadline: float) -> ErrorCode:
        """Wait until the high watermark reaches ``required`` (acks=all) while this broker keeps
        leading ``tp`` (new epochs of a continuous leadership included).  Returns NONE,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT.
        Cancel-safe: nothing is held while waiting (an abandoned heap entry is dropped when
        the high watermark passes it or the leadership ends)."""
        while True:
            while state.successor is not None:
                state = state.successor
            if self.leaders.get(tp) is not state:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if state.plog.high_watermark >= required:
                break
            if trio.current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT
            event = trio.Event()
            heapq.heappush(state.acks_waiters, (required, next(self._sequence), event))
            with trio.move_on_at(deadline):
                await event.wait()
        if len(state.isr) < state.plog.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    def low_watermark(self, state: LeaderState) -> int:
        """The smallest log start offset over this leader and its live followers (Kafka's
        low watermark, what DeleteRecords answers); -1 while a live follower has not reported."""
        low = state.plog.log_start_offset
        for r in state.replicas:
            if r != self.node_id and (self.live is None or r in self.live):
                low = min(low, state.follower_start.get(r, -1))
        return low

    async def wait_low_watermark(self, tp: TopicPartition, state: LeaderState, required: int,
                                 deadline: float) -> ErrorCode:
        """DeleteRecords: wait until every live replica's log start reaches ``required``.
        Returns NONE, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT.  Cancel-safe."""
        return await self._wait_until(tp, state, lambda: self.low_watermark(state) >= required, deadline)

    async def _wait_until(self, tp: TopicPartition, state: LeaderState, reached, deadline: float) -> ErrorCode:
        """Wait, woken by each follower report, until ``reached()`` while ``state`` still leads
        ``tp``: NONE, NOT_LEADER_OR_FOLLOWER, or REQUEST_TIMED_OUT at ``deadline``."""
        while True:
            if self.leaders.get(tp) is not state:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            if reached():
                return ErrorCode.NONE
            if trio.current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT
            with trio.move_on_at(deadline):
                await state.hw_event.wait()

    def _wake(self, state: LeaderState) -> None:
        event, state.hw_event = state.hw_event, trio.Event()
        event.set()

    @staticmethod
    def _release_acks(state: LeaderState, up_to: int | None = None) -> None:
        """Wake the acks=all waiters whose offset ``up_to`` (the high watermark) reaches; all
        of them when None (the leadership ended: they answer NOT_LEADER_OR_FOLLOWER)."""
        waiters = state.acks_waiters
        while waiters and (up_to is None or waiters[0][0] <= up_to):
            heapq.heappop(waiters)[2].set()

    # -- the high watermark -------------------------------------------------------------
    def _advance_hw(self, tp: TopicPartition, state: LeaderState) -> None:
        plog = state.plog
        hw = plog.log_end_offset
        for r in self.maximal_isr(state):
            if r != self.node_id:
                hw = min(hw, state.follower_leo.get(r, -1))
        if hw >= 0 and plog.update_high_watermark(hw):
            self._wake(state)
            self._release_acks(state, plog.high_watermark)
            self.notify_committed([tp])

    @staticmethod
    def maximal_isr(state: LeaderState) -> tuple[int, ...]:
        """The ISR the high watermark waits for: the settled one plus, while a write is in
        flight or of unknown outcome, the members it adds (Kafka's maximalIsr)."""
        if state.pending_isr is None:
            return state.isr
        return state.isr + tuple(r for r in state.pending_isr if r not in state.isr)

    # -- ISR maintenance -------------------------------------------------------------
    def _eligible(self, state: LeaderState, r: int) -> bool:
        """May follower ``r`` join the ISR (Kafka's isFollowerInSync plus KIP-841's liveness)?"""
        leo = state.follower_leo.get(r, -1)
        return (r != self.node_id and r not in self.shutting_down
                and (self.live is None or r in self.live)
                and leo >= state.plog.high_watermark and leo >= state.epoch_start_offset)

    def _caught_up(self, state: LeaderState, r: int, now_ms: int) -> bool:
        """Kafka's Replica.isCaughtUp: at the leader's LEO, or caught up within the lag time."""
        return (state.follower_leo.get(r, -1) >= state.plog.log_end_offset
                or now_ms - state.caught_up_ms.get(r, now_ms) <= self.lag_ms)

    def wanted_isr(self, state: LeaderState, now_ms: int) -> tuple[int, ...]:
        """The ISR this leader should publish: laggards out, caught-up followers in."""
        isr = [r for r in state.isr if r == self.node_id or self._caught_up(state, r, now_ms)]
        isr += [r for r in state.replicas if r not in state.isr and self._eligible(state, r)]
        if self.node_id not in isr:
            isr.insert(0, self.node_id)
        return tuple(r for r in state.replicas if r in isr)

    async def run_isr_maintenance(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Shrink and expand ISRs: every lag/2 ms, and at once when a follower catches up."""
        task_status.started()
        interval = max(self.lag_ms / 2000, 0.05)
        while True:
            with trio.move_on_after(interval):
                await self._isr_wake.wait()
            self._isr_wake = trio.Event()
            await self.update_isrs()

    async def update_isrs(self) -> None:
        now = self.clock.now_ms()
        for tp, state in list(self.leaders.items()):
            if state.pending_isr is not None:
                continue                 # one write at a time; an unknown outcome waits for a read
            isr = self.wanted_isr(state, now)
            if set(isr) == set(state.isr):
                continue
            await self._write_isr(tp, state, isr, now)

    async def _write_isr(self, tp: TopicPartition, state: LeaderState, isr: tuple[int, ...],
                         now: int) -> None:
        state.pending_isr = isr
        try:
            version = await self.write_isr(tp, isr, state.leader_epoch, state.zk_version)
        except IsrWriteUnknown:
            logger.warning("%s-%d: ISR update to %s has an unknown outcome; the high watermark "
                           "waits for %s until ZooKeeper is read again", tp[0], tp[1], list(isr),
                           list(self.maximal_isr(state)))
            state.pending_unknown = True
            return
        if self.leaders.get(tp) is not state or state.pending_isr is not isr:
            return                       # the leadership or the state moved on meanwhile
        state.pending_isr = None
        if version is None:
            logger.info("%s-%d: ISR update to %s lost a race (znode version %d moved on); "
                        "waiting for the new state", tp[0], tp[1], list(isr), state.zk_version)
            self._advance_hw(tp, state)
            return
        logger.info("%s-%d: ISR %s -> %s", tp[0], tp[1], list(state.isr), list(isr))
        for r in isr:
            if r not in state.isr:
                state.caught_up_ms[r] = now
        state.isr, state.zk_version = isr, version
        self._advance_hw(tp, state)
        self._wake(state)                # waiters re-check min.insync.replicas
