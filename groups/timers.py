"""The coordinator's timers as plain deadlines (part of ``GroupCoordinator``).

Kafka keeps purgatories of delayed operations; here each group knows its
earliest due event (a pending member id, a member session, the end of the
join phase, the pending-sync timeout, offset expiry / group removal) and the
coordinator keeps a heap of (deadline, group_id) with lazy invalidation.
"""
from __future__ import annotations

import heapq

from kwire.codecs.errors import ErrorCode

from .effects import Effects
from .group import Group, GroupState
from .records import group_key, offset_key
from .results import Outcome, Record, SyncResult

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
# Enough for any sane group; a guard against a handler that makes no progress.
MAX_EVENTS_PER_GROUP = 100_000


class TimersMixin:
    def tick(self, now_ms: int) -> Outcome:
        """Run every timer due at ``now_ms``: expire sessions and pending member ids, end join
        phases (initial delay, rebalance timeout) and pending syncs, expire offsets, drop dead groups."""
        fx = self._begin(now_ms)
        while self._heap and self._heap[0][0] <= now_ms:
            at, group_id = heapq.heappop(self._heap)
            if self._scheduled.get(group_id) == at:
                del self._scheduled[group_id]
                fx.touch(group_id)
        self._consumer_tick(fx)
        return self._finish(fx)

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` next has work (0 right after a replay: sessions need a clock), or None."""
        if self._unscheduled:
            return 0
        self._reschedule(self._stale)
        self._stale.clear()
        while self._heap and self._scheduled.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        consumer = self._consumer_next_deadline()
        classic = self._heap[0][0] if self._heap else None
        return min((at for at in (classic, consumer) if at is not None), default=None)

    # -- events -------------------------------------------------------------
    def _next_event(self, group: Group) -> tuple[int, str, str | None] | None:
        best: tuple[int, str, str | None] | None = None

        def consider(at: int | None, kind: str, key: str | None = None) -> None:
            nonlocal best
            if at is not None and (best is None or at < best[0]):
                best = (at, kind, key)

        for member_id, at in group.pending_members.items():
            consider(at, "pending", member_id)
        for member in group.members.values():
            consider(member.session_deadline(), "session", member.member_id)
        if group.is_(PREPARING):
            consider(group.join_deadline_ms, "join")
        if group.is_(COMPLETING, STABLE) and group.pending_sync:
            consider(group.sync_deadline_ms, "sync")
        consider(self._offsets_deadline(group), "offsets")
        return best

    def _run_due(self, fx: Effects, group: Group) -> None:
        now_ms = fx.now_ms
        for _ in range(MAX_EVENTS_PER_GROUP):
            if self._groups.get(group.group_id) is not group:
                return
            event = self._next_event(group)
            if event is None or event[0] > now_ms:
                return
            _, kind, key = event
            fx.touch(group.group_id)
            if kind == "pending":
                del group.pending_members[key]
                self._try_complete_join(fx, group)
            elif kind == "session":
                self._remove_member_and_update(fx, group, group.members[key])
            elif kind == "join":
                self._on_join_deadline(fx, group)
            elif kind == "sync":
                self._on_sync_deadline(fx, group)
            else:
                self._expire_offsets(fx, group)
        raise RuntimeError(f"group {group.group_id!r}: timers make no progress")

    def _on_sync_deadline(self, fx: Effects, group: Group) -> None:
        """Members that never sent SyncGroup within the rebalance timeout are removed."""
        for member_id in [m for m in group.members if m in group.pending_sync]:
            member = group.members[member_id]
            self._answer_sync(fx, member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            group.remove(member_id)
        self._prepare_rebalance(fx, group)

    # -- offsets and group removal ------------------------------------------------
    def _offsets_deadline(self, group: Group) -> int | None:
        cfg = self.config
        ats = [at for _, at in self._offset_expiries(group)]
        if self._droppable(group):
            ats.append((group.state_timestamp or 0) + cfg.offsets_retention_check_interval_ms)
        return min(ats, default=None)

    def _offset_expiries(self, group: Group) -> list[tuple[tuple[str, int], int]]:
        """(partition, expiry) of the group's offsets; a KIP-848 consumer group's (held by an
        offsets-only Group) as Kafka's OffsetMetadataManager: the offsets of topics its members
        subscribe to are kept, the others expire the retention after their commit."""
        consumer = self._consumer_groups.get(group.group_id)
        if consumer is None:
            return group.offset_expiries(self.config.offsets_retention_ms)
        return [(tp, e.expire_timestamp if e.expire_timestamp >= 0
                 else e.commit_timestamp + self.config.offsets_retention_ms)
                for tp, e in group.offsets.items() if tp[0] not in consumer.subscription_metadata]

    @staticmethod
    def _droppable(group: Group) -> bool:
        return (group.is_(EMPTY) and not group.offsets and not group.pending_members and not group.members
                and not group.pending_txn_offsets)

    def _expire_offsets(self, fx: Effects, group: Group) -> None:
        cfg, now_ms = self.config, fx.now_ms
        expired = [tp for tp, at in self._offset_expiries(group) if at <= now_ms]
        self._remove_offsets(fx, group, expired)
        if self._droppable(group) and (
                expired or (group.state_timestamp or 0) + cfg.offsets_retention_check_interval_ms <= now_ms):
            self._drop_group(fx, group)

    @staticmethod
    def _remove_offsets(fx: Effects, group: Group, partitions) -> None:
        for topic, partition in partitions:
            if group.offsets.pop((topic, partition), None) is not None:
                fx.append(Record(group.group_id, offset_key(group.group_id, topic, partition), None))

    def _drop_group(self, fx: Effects, group: Group) -> None:
        """The group is Dead: forget it; its metadata record is tombstoned if it ever wrote one."""
        self._remove_offsets(fx, group, list(group.offsets))
        if group.generation_id > 0:
            fx.append(Record(group.group_id, group_key(group.group_id), None))
        group.transition(GroupState.DEAD, fx.now_ms)
        del self._groups[group.group_id]
        fx.touch(group.group_id)
