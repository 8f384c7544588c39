"""One share-partition's delivery state (KIP-932), sans-I/O: Kafka's ``SharePartition`` rules.

A share group reads a topic-partition as a queue.  The records from the share-partition
start offset (SPSO) up to its end offset (SPEO, exclusive here: the next offset never yet
acquired) are *in flight*, each in one state:

    AVAILABLE     may be acquired by any member
    ACQUIRED      held by one member until its acquisition lock expires
    ACKNOWLEDGED  processed (ACCEPT): never delivered again
    ARCHIVED      rejected, a gap, or delivered ``delivery_count_limit`` times: never again

``TRANSITIONS`` is the table of every allowed change.  A renew (acknowledge type 4, Kafka
4.2's ShareFetch/ShareAcknowledge v2) keeps a record ACQUIRED by its member and restarts its
acquisition lock.  Each acquisition counts one
delivery; a record released (RELEASE, lock expiry, its member leaving) after its last
allowed delivery is archived instead of made available.  The SPSO moves over the prefix of
acknowledged/archived records, which are then forgotten.  At most
``max_record_locks`` records are in flight; new records wait until the SPSO moves.

Nothing here reads a clock: every call gets ``now_ms``.  ``state()`` is what is persisted
(ACQUIRED is written as AVAILABLE with its delivery count, so after a crash it is
delivered again; ACKNOWLEDGED/ARCHIVED never are).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .share_records import ACKNOWLEDGED as P_ACKNOWLEDGED, ARCHIVED as P_ARCHIVED, AVAILABLE as P_AVAILABLE
from .share_records import ShareState, StateBatch


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge AcknowledgeTypes."""
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4          # version 2+: keep the records, restart their acquisition lock


A, Q, K, X = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED

# (state, event) -> next state; "release" may archive instead, at the delivery count limit
TRANSITIONS: dict[tuple[RecordState, str], RecordState] = {
    (A, "acquire"): Q,
    (Q, "accept"): K,
    (Q, "release"): A,
    (Q, "reject"): X,
    (Q, "gap"): X,
    (Q, "renew"): Q,
    (Q, "expire"): A,
    (Q, "member_gone"): A,
    (A, "skip"): X,        # below the log start offset (retention): nothing to deliver
}
ACK_EVENTS = {AckType.GAP: "gap", AckType.ACCEPT: "accept", AckType.RELEASE: "release", AckType.REJECT: "reject",
              AckType.RENEW: "renew"}
TERMINAL = (K, X)


class InvalidRecordState(Exception):
    """An acknowledgement of records this member does not hold (Kafka: INVALID_RECORD_STATE)."""


class InvalidRequest(Exception):
    """A malformed acknowledgement batch (Kafka: INVALID_REQUEST)."""


@dataclass
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True)
class PartitionLimits:
    record_lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int


class SharePartition:
    """The in-flight records of one (group, topic, partition)."""

    def __init__(self, limits: PartitionLimits, start_offset: int, state_epoch: int = 0):
        self.limits = limits
        self.spso = start_offset
        self.speo = start_offset
        self.state_epoch = state_epoch
        self.snapshot_epoch = 0
        self.records: dict[int, InFlight] = {}
        # no lock ends before this (a lower bound: acknowledged records are not subtracted), so
        # the timer's expire_locks is a comparison until then
        self._earliest_deadline: int | None = None

    @classmethod
    def from_state(cls, limits: PartitionLimits, state: ShareState) -> "SharePartition":
        sp = cls(limits, state.start_offset, state.state_epoch)
        sp.snapshot_epoch = state.snapshot_epoch
        sp.apply_batches(state.batches)
        return sp

    def apply_batches(self, batches) -> None:
        """Install persisted state batches (a snapshot's, or an update's on top of it)."""
        persisted = {P_AVAILABLE: A, P_ACKNOWLEDGED: K, P_ARCHIVED: X}
        for b in batches:
            for offset in range(max(b.first_offset, self.spso), b.last_offset + 1):
                self.records[offset] = InFlight(persisted.get(b.delivery_state, A), b.delivery_count)
            self.speo = max(self.speo, b.last_offset + 1)
        self._advance()

    # -- the transition table ---------------------------------------------------------
    def _move(self, offset: int, rec: InFlight, event: str) -> None:
        target = TRANSITIONS.get((rec.state, event))
        if target is None:
            raise InvalidRecordState(f"offset {offset}: {event} not allowed in state {rec.state.name}")
        if target is A and event != "acquire" and rec.delivery_count >= self.limits.delivery_count_limit:
            target = X
        rec.state = target
        if target is not Q:
            rec.member_id, rec.lock_deadline_ms = None, 0

    def _advance(self) -> None:
        while self.spso < self.speo:
            rec = self.records.get(self.spso)
            if rec is not None and rec.state not in TERMINAL:
                break
            self.records.pop(self.spso, None)
            self.spso += 1

    # -- reads -------------------------------------------------------------------------
    def fetch_offset(self, high_watermark: int) -> int | None:
        """Where a fetch for this partition reads from: the first AVAILABLE record, else the
        SPEO if the log has records there and locks are free; None when nothing to deliver."""
        for offset in range(self.spso, self.speo):
            rec = self.records.get(offset)
            if rec is not None and rec.state is A:
                return offset
        if self.speo < high_watermark and self.speo - self.spso < self.limits.max_record_locks:
            return self.speo
        return None

    def record_counts(self) -> dict[RecordState, int]:
        """How many records between the SPSO and the SPEO are in each state (every state a
        key).  AVAILABLE + ACQUIRED + ACKNOWLEDGED are the in-flight records KIP-932 counts;
        ``records`` holds only that window (``max_record_locks`` records, give or take the
        last batch acquired), so this is cheap enough for every metrics scrape."""
        counts = dict.fromkeys(RecordState, 0)
        for rec in self.records.values():
            counts[rec.state] += 1
        return counts

    # -- events -----------------------------------------------------------------------
    def skip_to(self, log_start_offset: int) -> bool:
        """Records below the log's start were deleted: archive them, move the SPSO there."""
        if self.spso >= log_start_offset:
            return False
        for offset in range(self.spso, min(log_start_offset, self.speo)):
            rec = self.records.get(offset)
            if rec is not None and rec.state is Q:
                rec.state = X
        self.speo = max(self.speo, log_start_offset)
        for offset in range(self.spso, log_start_offset):
            self.records.pop(offset, None)
        self.spso = log_start_offset
        self._advance()
        return True

    def acquire(self, member_id: str, batches: list[tuple], max_records: int,
                now_ms: int, record_limit: bool = False) -> list[tuple[int, int, int]]:
        """Acquire for ``member_id`` the available records inside the log ``batches`` read
        ((base_offset, last_offset[, is_control]) each, ascending; a control batch, a
        transaction marker, is archived, never delivered): redeliveries come as they lie,
        new records (from the SPEO) in whole batches while under ``max_records`` and the
        record-lock limit (``record_limit``, ShareAcquireMode 1: never more than
        ``max_records``, so a batch may be taken in part).  Returns (first_offset,
        last_offset, delivery_count) ranges."""
        deadline = now_ms + self.limits.record_lock_duration_ms
        taken: list[tuple[int, int]] = []           # (offset, delivery_count)
        for base, last, *control in batches:
            if len(taken) >= max_records:
                break
            for offset in range(max(base, self.spso), min(last + 1, self.speo)):
                rec = self.records.get(offset)
                if rec is not None and rec.state is A and len(taken) < max_records:
                    self._take(offset, rec, member_id, deadline, taken)
            if last < self.speo or self.speo - self.spso >= self.limits.max_record_locks:
                continue
            for offset in range(self.speo, max(base, self.speo)):   # offsets the log no longer has
                self.records[offset] = InFlight(X, 0)
            for offset in range(max(base, self.speo), last + 1):
                if record_limit and len(taken) >= max_records:
                    break
                rec = self.records[offset] = InFlight(X if control and control[0] else A, 0)
                if rec.state is A:
                    self._take(offset, rec, member_id, deadline, taken)
                self.speo = offset + 1
        self._advance()
        return _ranges(taken)

    def _take(self, offset, rec, member_id, deadline, taken) -> None:
        self._move(offset, rec, "acquire")
        rec.delivery_count += 1
        rec.member_id, rec.lock_deadline_ms = member_id, deadline
        if self._earliest_deadline is None or deadline < self._earliest_deadline:
            self._earliest_deadline = deadline
        taken.append((offset, rec.delivery_count))

    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, types: list[int],
                    now_ms: int = 0) -> None:
        """Apply one acknowledgement batch; all or nothing.  ``types`` holds one type for the
        whole range or one per offset; a renew restarts the lock at ``now_ms``.  Raises
        InvalidRequest or InvalidRecordState."""
        count = last_offset - first_offset + 1
        if count <= 0 or len(types) not in (1, count):
            raise InvalidRequest(f"bad acknowledgement batch {first_offset}-{last_offset} ({len(types)} types)")
        try:
            events = [ACK_EVENTS[AckType(t)] for t in types]
        except ValueError:
            raise InvalidRequest(f"unknown acknowledge type in {types}") from None
        plan = []
        for i, offset in enumerate(range(first_offset, last_offset + 1)):
            rec = self.records.get(offset)
            if rec is None or rec.state is not Q or rec.member_id != member_id:
                raise InvalidRecordState(f"offset {offset} is not acquired by {member_id}")
            plan.append((offset, rec, events[i if len(events) > 1 else 0]))
        for offset, rec, event in plan:
            self._move(offset, rec, event)
            if event == "renew":      # later than the old deadline: _earliest_deadline stays a bound
                rec.lock_deadline_ms = now_ms + self.limits.record_lock_duration_ms
        self._advance()

    def release_member(self, member_id: str) -> bool:
        """The member left or was fenced: its acquired records become available again."""
        return self._release(lambda r: r.member_id == member_id, "member_gone")

    def expire_locks(self, now_ms: int) -> bool:
        """Acquisition locks past their deadline end: those records become available again."""
        if self._earliest_deadline is None or now_ms < self._earliest_deadline:
            return False
        changed = self._release(lambda r: r.lock_deadline_ms <= now_ms, "expire")
        self._earliest_deadline = self.next_lock_deadline()
        return changed

    def _release(self, which, event: str) -> bool:
        changed = False
        for offset, rec in list(self.records.items()):
            if rec.state is Q and which(rec):
                self._move(offset, rec, event)
                changed = True
        if changed:
            self._advance()
        return changed

    def next_lock_deadline(self) -> int | None:
        deadlines = [r.lock_deadline_ms for r in self.records.values() if r.state is Q]
        return min(deadlines) if deadlines else None

    # -- persistence --------------------------------------------------------------------
    def state(self, leader_epoch: int = 0) -> ShareState:
        """What to persist: the SPSO and every in-flight record (ACQUIRED as AVAILABLE)."""
        self.snapshot_epoch += 1
        persisted = {A: P_AVAILABLE, Q: P_AVAILABLE, K: P_ACKNOWLEDGED, X: P_ARCHIVED}
        batches: list[StateBatch] = []
        for offset in range(self.spso, self.speo):
            rec = self.records.get(offset)
            if rec is None:
                continue
            kind = (persisted[rec.state], rec.delivery_count)
            last = batches[-1] if batches else None
            if last is not None and last.last_offset == offset - 1 and (last.delivery_state,
                                                                       last.delivery_count) == kind:
                batches[-1] = StateBatch(last.first_offset, offset, *kind)
            else:
                batches.append(StateBatch(offset, offset, *kind))
        return ShareState(self.snapshot_epoch, self.state_epoch, leader_epoch, self.spso, tuple(batches))


def _ranges(taken: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    out: list[list[int]] = []
    for offset, count in taken:
        if out and out[-1][1] == offset - 1 and out[-1][2] == count:
            out[-1][1] = offset
        else:
            out.append([offset, offset, count])
    return [tuple(r) for r in out]


def share_lag(sp: SharePartition, high_watermark: int) -> int:
    """Records of the log not yet delivery-complete for the group (Kafka's share-partition lag,
    KIP-1226): those from the start offset up to the high watermark, less the ones already
    acknowledged or archived above the start offset."""
    done = sum(1 for offset, rec in sp.records.items() if offset < high_watermark and rec.state in TERMINAL)
    return max(0, high_watermark - sp.spso - done)


def persisted_lag(state: ShareState, high_watermark: int) -> int:
    """``share_lag`` from persisted state (what a share coordinator holds): acknowledged and
    archived batches above the start offset are delivery-complete."""
    done = sum(max(0, min(b.last_offset + 1, high_watermark) - max(b.first_offset, state.start_offset))
               for b in state.batches if b.delivery_state in (P_ACKNOWLEDGED, P_ARCHIVED))
    return max(0, high_watermark - state.start_offset - done)


def delivery_complete_count(state: ShareState) -> int:
    """The offsets at or above the start offset whose delivery is complete (acknowledged or
    archived), from persisted state: ReadShareGroupStateSummary v1's DeliveryCompleteCount."""
    return sum(max(0, b.last_offset + 1 - max(b.first_offset, state.start_offset))
               for b in state.batches if b.delivery_state in (P_ACKNOWLEDGED, P_ARCHIVED))
