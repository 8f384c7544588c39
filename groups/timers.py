"""The group coordinator's timers as plain deadlines (``GroupTimers``).

Kafka keeps purgatories of delayed operations; here each classic group knows its
earliest due event (a pending member id, a member session, the end of the
join phase, the pending-sync timeout, offset expiry / group removal) and the
timers keep a ``Deadlines`` queue of group ids.  KIP-848 consumer groups are
scanned instead (their members' session, revocation, join and sync deadlines and
the removal of an empty group): kwire's groups are few; Kafka keeps one timer
per member.  What an event does is the business of the manager that owns the
state: the classic-group manager, the offsets manager, the consumer-group manager.

A group replayed at start-up has no deadlines yet: its members' sessions start at
the first call that carries a clock (``begin``), and ``next_deadline_ms`` is 0
until then.
"""
from __future__ import annotations

from .classic_groups import ClassicGroupManager
from .consumer_coordinator import ConsumerGroupManager, classic_timed_out, session_timeout_of
from .consumer_group import ConsumerGroup, MemberState
from .context import GroupContext
from .deadlines import Deadlines
from .effects import Effects
from .group import Group, GroupState
from .offsets import OffsetManager

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
# Enough for any sane group; a guard against a handler that makes no progress.
MAX_EVENTS_PER_GROUP = 100_000


class GroupTimers:
    def __init__(self, ctx: GroupContext, classic: ClassicGroupManager, offsets: OffsetManager,
                 consumer: ConsumerGroupManager):
        """``classic``, ``offsets`` and ``consumer`` are the managers whose events fire here."""
        self._ctx = ctx
        self._classic = classic
        self._offsets = offsets
        self._consumer = consumer
        self._deadlines = Deadlines()
        self._stale: set[str] = set()         # replayed groups whose timers are not scheduled yet
        self._unscheduled: set[str] = set()   # replayed groups whose members have no session deadline
        self._consumer_unscheduled: set[str] = set()

    # -- what replay and unloading tell the timers --------------------------------------
    def replayed(self, group_id: str) -> None:
        """A record of the classic group (or offsets holder) was replayed: schedule it again."""
        self._stale.add(group_id)

    def replayed_members(self, group_id: str) -> None:
        """The replayed group has members: their sessions start at the next clock."""
        self._unscheduled.add(group_id)

    def replayed_consumer_group(self, group_id: str) -> None:
        """A consumer group was replayed: its sessions and its removal need a clock."""
        self._consumer_unscheduled.add(group_id)

    def forget(self, group_id: str) -> None:
        self._deadlines.discard(group_id)
        self._stale.discard(group_id)
        self._unscheduled.discard(group_id)

    def forget_consumer_group(self, group_id: str) -> None:
        self._consumer_unscheduled.discard(group_id)

    # -- one call: begin, finish; tick ---------------------------------------------------
    def begin(self, fx: Effects) -> None:
        """Replayed members get their session deadline from the first clock."""
        for group_id in self._unscheduled:
            group = self._ctx.groups.get(group_id)
            for member in group.members.values() if group else ():
                if member.deadline_ms is None:
                    member.deadline_ms = fx.now_ms + member.session_timeout_ms
            fx.touch(group_id)
        self._unscheduled.clear()
        for group_id in self._consumer_unscheduled:
            consumer = self._ctx.consumer_groups.get(group_id)
            for m in consumer.members.values() if consumer else ():
                if m.session_deadline_ms is None:
                    m.session_deadline_ms = fx.now_ms + session_timeout_of(m, self._ctx.config)
            if consumer is not None and not consumer.members and consumer.empty_since_ms is None:
                consumer.empty_since_ms = fx.now_ms
        self._consumer_unscheduled.clear()

    def finish(self, fx: Effects) -> None:
        """Run the due events of the groups the call touched, then reschedule them."""
        for group_id in sorted(fx.touched):
            group = self._ctx.groups.get(group_id)
            if group is not None:
                self._run_due(fx, group)
        self._reschedule(fx.touched)

    def tick(self, fx: Effects) -> None:
        """Touch every classic group due at ``fx.now_ms`` (``finish`` runs them); fence the
        consumer group members whose time is up."""
        for group_id in self._deadlines.pop_due(fx.now_ms):
            fx.touch(group_id)
        self._consumer_tick(fx)

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` next has work (0 right after a replay: sessions need a clock), or None."""
        if self._unscheduled:
            return 0
        self._reschedule(self._stale)
        self._stale.clear()
        classic = self._deadlines.earliest()
        consumer = self._consumer_next_deadline()
        return min((at for at in (classic, consumer) if at is not None), default=None)

    def _reschedule(self, group_ids) -> None:
        for group_id in group_ids:
            group = self._ctx.groups.get(group_id)
            event = self._next_event(group) if group is not None else None
            self._deadlines.set(group_id, None if event is None else event[0])
        self._deadlines.compact()

    # -- classic groups --------------------------------------------------------------------
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
        consider(self._offsets.deadline(group), "offsets")
        return best

    def _run_due(self, fx: Effects, group: Group) -> None:
        now_ms = fx.now_ms
        for _ in range(MAX_EVENTS_PER_GROUP):
            if self._ctx.groups.get(group.group_id) is not group:
                return
            event = self._next_event(group)
            if event is None or event[0] > now_ms:
                return
            _, kind, key = event
            fx.touch(group.group_id)
            if kind == "pending":
                self._classic.expire_pending(fx, group, key)
            elif kind == "session":
                self._classic.remove_member(fx, group, group.members[key])
            elif kind == "join":
                self._classic.on_join_deadline(fx, group)
            elif kind == "sync":
                self._classic.on_sync_deadline(fx, group)
            else:
                self._offsets.expire(fx, group)
        raise RuntimeError(f"group {group.group_id!r}: timers make no progress")

    # -- KIP-848 consumer groups -------------------------------------------------------------
    def _consumer_next_deadline(self) -> int | None:
        """The earliest session or revocation deadline of any consumer group member, or removal
        of an empty consumer group."""
        if self._consumer_unscheduled:
            return 0
        consumer_groups = self._ctx.consumer_groups.values()
        ats = [at for g in consumer_groups for m in g.members.values()
               for at in (m.session_deadline_ms, m.rebalance_deadline_ms, m.join_deadline_ms, m.sync_deadline_ms)
               if at is not None]
        ats += [at for g in consumer_groups if (at := self._removal_deadline(g)) is not None]
        return min(ats, default=None)

    def _removal_deadline(self, group: ConsumerGroup) -> int | None:
        """An Empty consumer group without offsets is deleted (tombstoned) at the next offsets
        cleanup, as Kafka's cleanupGroupMetadata; here one check interval after it became Empty."""
        holder = self._ctx.groups.get(group.group_id)
        if group.members or group.empty_since_ms is None or (holder is not None and holder.offsets):
            return None
        return group.empty_since_ms + self._ctx.config.offsets_retention_check_interval_ms

    def _consumer_tick(self, fx: Effects) -> None:
        """Fence the members whose session expired or who did not revoke within the rebalance timeout."""
        consumer_groups = self._ctx.consumer_groups
        for group in list(consumer_groups.values()):
            for member in list(group.members.values()):
                expired = member.session_deadline_ms is not None and member.session_deadline_ms <= fx.now_ms
                late = (member.rebalance_deadline_ms is not None and member.rebalance_deadline_ms <= fx.now_ms
                        and member.state is MemberState.UNREVOKED_PARTITIONS)
                if expired or late or classic_timed_out(member, fx.now_ms):
                    self._consumer.fence_or_downgrade(fx, group, member)
                    if group.group_id not in consumer_groups:
                        break           # downgraded to a classic group
            if group.group_id not in consumer_groups:
                continue
            removal = self._removal_deadline(group)
            if removal is not None and removal <= fx.now_ms:
                self._consumer.delete(fx, group)
